-- +goose Up
-- An operator's settlement of a process left for review, as on PostgreSQL
-- (0010 there); resolved_at in milliseconds of SQLite's clock. SQLite adds
-- no table constraint to an existing table: the store checks the lengths.
ALTER TABLE process_log ADD COLUMN resolved_by TEXT NOT NULL DEFAULT '';
ALTER TABLE process_log ADD COLUMN resolved_at INTEGER;
ALTER TABLE process_log ADD COLUMN resolution_evidence TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE process_log DROP COLUMN resolution_evidence;
ALTER TABLE process_log DROP COLUMN resolved_at;
ALTER TABLE process_log DROP COLUMN resolved_by;
