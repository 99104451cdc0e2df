-- +goose Up
-- The article's agent_operation_log for the embedded SQLite journal: the same
-- tables and columns as the PostgreSQL journal (migrations/postgres), so that
-- traces read the same.
--
-- Engine differences, declared here:
--   * Times are INTEGER milliseconds since the Unix epoch (UTC), taken from
--     SQLite's clock in the statement that uses them:
--     CAST(round(unixepoch('subsec') * 1000) AS INTEGER). Integers compare and
--     add exactly, so a lease expires at lease_until < now with no text
--     parsing; the Go clock never decides a lease.
--   * response_json is TEXT holding valid JSON (json_valid), not jsonb.
--   * Tables are STRICT: a wrong type is an error, not a silent conversion.
--   * Tables keep their rowid (not WITHOUT ROWID): rows sit in insertion
--     order, so a batch claimed together is completed on the same few pages,
--     and terminal rows append to the indexes. Keyed by operation_key the
--     rows scatter: 2.5 times the pages written (and fsynced) per batch of
--     100 (journal/sqlite TestPagesWrittenPerBatch).
--   * ON DELETE CASCADE needs PRAGMA foreign_keys=ON on the writing
--     connection; the store sets it on every connection it opens.
CREATE TABLE agent_operation_log (
    operation_key      TEXT PRIMARY KEY,
    operation_type     TEXT NOT NULL,
    request_hash       TEXT NOT NULL,
    status             TEXT NOT NULL
                       CHECK (status IN (
                         'started',
                         'succeeded',
                         'failed_retryable',
                         'failed_final',
                         'unknown'
                       )),
    target_system      TEXT NOT NULL,
    target_object_id   TEXT,
    response_json      TEXT CHECK (response_json IS NULL OR json_valid(response_json)),
    error_code         TEXT,
    attempt_count      INTEGER NOT NULL DEFAULT 1,
    lease_until        INTEGER,
    created_at         INTEGER NOT NULL DEFAULT (CAST(round(unixepoch('subsec') * 1000) AS INTEGER)),
    updated_at         INTEGER NOT NULL DEFAULT (CAST(round(unixepoch('subsec') * 1000) AS INTEGER)),
    completed_at       INTEGER,
    event_id           TEXT NOT NULL DEFAULT '',
    approval_id        TEXT NOT NULL DEFAULT '',
    lease_owner        TEXT,
    lease_token        INTEGER NOT NULL DEFAULT 1,
    reconcile_rounds   INTEGER NOT NULL DEFAULT 0,
    CHECK (length(CAST(operation_key AS BLOB)) <= 255),
    CHECK ((completed_at IS NOT NULL) = (status IN ('succeeded', 'failed_final')))
) STRICT;

CREATE INDEX agent_operation_log_status_idx
    ON agent_operation_log (status, lease_until);

-- Retention: the janitor deletes terminal rows by completion time.
CREATE INDEX agent_operation_log_completed_idx
    ON agent_operation_log (completed_at)
    WHERE status IN ('succeeded', 'failed_final');

-- One row per attempt (execution, reconciliation or operator decision), added
-- when the lease is taken and closed once when its outcome is recorded; rows
-- are never rewritten after that and leave only with their operation.
CREATE TABLE agent_operation_attempts (
    operation_key      TEXT NOT NULL
                       REFERENCES agent_operation_log (operation_key) ON DELETE CASCADE,
    attempt            INTEGER NOT NULL,
    lease_token        INTEGER NOT NULL,
    worker             TEXT NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('execute', 'reconcile', 'operator')),
    started_at         INTEGER NOT NULL DEFAULT (CAST(round(unixepoch('subsec') * 1000) AS INTEGER)),
    finished_at        INTEGER,
    outcome            TEXT,
    error_code         TEXT,
    target_request_id  TEXT,
    note               TEXT,
    PRIMARY KEY (operation_key, lease_token)
) STRICT;

-- +goose Down
DROP TABLE agent_operation_attempts;
DROP TABLE agent_operation_log;
