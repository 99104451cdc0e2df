-- +goose Up
-- An operator's settlement of a process left for review (needs_review): a
-- person put the targets right by hand and records what the process now
-- nets to (succeeded: what it was for is done; compensated: what it did is
-- undone), who, when and why. The process is then at rest like any other
-- and goes by the journal's retention; failed_step and error_code keep what
-- had stopped it.
ALTER TABLE process_log ADD COLUMN resolved_by text NOT NULL DEFAULT '';
ALTER TABLE process_log ADD COLUMN resolved_at timestamptz;
ALTER TABLE process_log ADD COLUMN resolution_evidence text NOT NULL DEFAULT '';
ALTER TABLE process_log ADD CONSTRAINT process_log_resolution_check
    CHECK ((resolved_at IS NULL) = (resolved_by = '')
       AND octet_length(resolved_by) <= 200 AND octet_length(resolution_evidence) <= 2000);

-- +goose Down
ALTER TABLE process_log DROP CONSTRAINT process_log_resolution_check;
ALTER TABLE process_log DROP COLUMN resolution_evidence;
ALTER TABLE process_log DROP COLUMN resolved_at;
ALTER TABLE process_log DROP COLUMN resolved_by;
