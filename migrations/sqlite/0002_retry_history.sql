-- +goose Up
-- The same change as migrations/postgres/0002_retry_history.sql: history an
-- operator needs once an outcome is settled (reconcile_rounds_total,
-- raised_at), effect_possible, and attempt outcomes as a closed set with
-- fenced and abandoned; attempts left open under a superseded token are
-- closed as abandoned.
--
-- Engine difference, declared here: SQLite cannot add a CHECK constraint to
-- an existing table, so agent_operation_attempts is rebuilt (create, copy,
-- drop, rename) inside the migration's transaction. Nothing references it,
-- so foreign keys stay on.
ALTER TABLE agent_operation_log ADD COLUMN reconcile_rounds_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_operation_log ADD COLUMN raised_at INTEGER;
ALTER TABLE agent_operation_log ADD COLUMN effect_possible INTEGER NOT NULL DEFAULT 0
    CHECK (effect_possible IN (0, 1));

UPDATE agent_operation_log SET reconcile_rounds_total = reconcile_rounds WHERE reconcile_rounds > 0;

UPDATE agent_operation_log SET effect_possible = 1
WHERE status = 'unknown'
   OR EXISTS (SELECT 1 FROM agent_operation_attempts a
              WHERE a.operation_key = agent_operation_log.operation_key AND a.outcome = 'unknown');

CREATE TABLE agent_operation_attempts_0002 (
    operation_key      TEXT NOT NULL
                       REFERENCES agent_operation_log (operation_key) ON DELETE CASCADE,
    attempt            INTEGER NOT NULL,
    lease_token        INTEGER NOT NULL,
    worker             TEXT NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('execute', 'reconcile', 'operator')),
    started_at         INTEGER NOT NULL DEFAULT (CAST(round(unixepoch('subsec') * 1000) AS INTEGER)),
    finished_at        INTEGER,
    outcome            TEXT CHECK (outcome IN (
                         'succeeded', 'failed_retryable', 'failed_final', 'unknown', 'fenced', 'abandoned')),
    error_code         TEXT,
    target_request_id  TEXT,
    note               TEXT,
    PRIMARY KEY (operation_key, lease_token),
    CHECK ((finished_at IS NULL) = (outcome IS NULL))
) STRICT;

INSERT INTO agent_operation_attempts_0002
    (operation_key, attempt, lease_token, worker, kind, started_at, finished_at, outcome, error_code, target_request_id, note)
SELECT a.operation_key, a.attempt, a.lease_token, a.worker, a.kind, a.started_at,
       CASE WHEN a.finished_at IS NULL AND a.lease_token < l.lease_token
            THEN CAST(round(unixepoch('subsec') * 1000) AS INTEGER) ELSE a.finished_at END,
       CASE WHEN a.finished_at IS NULL AND a.lease_token < l.lease_token
            THEN 'abandoned' ELSE a.outcome END,
       a.error_code, a.target_request_id, a.note
FROM agent_operation_attempts a JOIN agent_operation_log l USING (operation_key);

DROP TABLE agent_operation_attempts;
ALTER TABLE agent_operation_attempts_0002 RENAME TO agent_operation_attempts;

-- +goose Down
CREATE TABLE agent_operation_attempts_0001 (
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
INSERT INTO agent_operation_attempts_0001
SELECT operation_key, attempt, lease_token, worker, kind, started_at,
       CASE WHEN outcome IN ('fenced', 'abandoned') THEN NULL ELSE finished_at END,
       CASE WHEN outcome IN ('fenced', 'abandoned') THEN NULL ELSE outcome END,
       error_code, target_request_id, note
FROM agent_operation_attempts;
DROP TABLE agent_operation_attempts;
ALTER TABLE agent_operation_attempts_0001 RENAME TO agent_operation_attempts;
ALTER TABLE agent_operation_log DROP COLUMN effect_possible;
ALTER TABLE agent_operation_log DROP COLUMN raised_at;
ALTER TABLE agent_operation_log DROP COLUMN reconcile_rounds_total;
