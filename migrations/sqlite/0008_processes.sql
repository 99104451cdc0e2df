-- +goose Up
-- Business processes, as on PostgreSQL (0007 there): one row per process,
-- its steps and compensations being ordinary operations with rows of their
-- own; times in milliseconds of SQLite's clock, as for operations.
CREATE TABLE process_log (
    process_key        TEXT PRIMARY KEY,
    process_name       TEXT NOT NULL,
    request_hash       TEXT NOT NULL,
    definition_digest  TEXT NOT NULL,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'succeeded', 'compensating', 'compensated', 'needs_review')),
    step               INTEGER NOT NULL DEFAULT 0 CHECK (step >= -1),
    failed_step        TEXT NOT NULL DEFAULT '',
    error_code         TEXT NOT NULL DEFAULT '',
    event_id           TEXT NOT NULL DEFAULT '',
    approval_id        TEXT NOT NULL DEFAULT '',
    lease_owner        TEXT,
    lease_token        INTEGER NOT NULL DEFAULT 1,
    lease_until        INTEGER,
    created_at         INTEGER NOT NULL DEFAULT (CAST(round(unixepoch('subsec') * 1000) AS INTEGER)),
    updated_at         INTEGER NOT NULL DEFAULT (CAST(round(unixepoch('subsec') * 1000) AS INTEGER)),
    completed_at       INTEGER,
    CHECK (length(CAST(process_key AS BLOB)) <= 255),
    CHECK ((completed_at IS NOT NULL) = (status IN ('succeeded', 'compensated', 'needs_review')))
) STRICT;

CREATE INDEX process_log_open_idx
    ON process_log (created_at)
    WHERE status IN ('running', 'compensating', 'needs_review');

CREATE TABLE process_definitions (
    definition_digest  TEXT PRIMARY KEY,
    process_name       TEXT NOT NULL,
    body               TEXT NOT NULL,
    created_at         INTEGER NOT NULL DEFAULT (CAST(round(unixepoch('subsec') * 1000) AS INTEGER))
) STRICT;

-- +goose Down
DROP TABLE process_definitions;
DROP TABLE process_log;
