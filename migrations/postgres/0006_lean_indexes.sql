-- +goose Up
-- Fewer index writes per operation. A claim inserts a row and its completion
-- writes a new row version that cannot be HOT (its status changes), so every
-- index of the log takes an entry at both steps.
--
--   * Operation keys compare bytewise (COLLATE "C"), as on SQLite. The primary
--     key then also reads an intent's keys as a range, so the separate
--     bytewise key index of 0004 goes, and key comparisons no longer go
--     through the database's locale.
--   * The status index of every row goes. What read it (the reconciler's
--     scans of unknown outcomes, expired leases, idle retryable failures and
--     lease holders) reads the partial index of the open operations of 0004,
--     which holds the work in flight only.
--
-- Changing the collation rebuilds the indexes on operation_key without
-- rewriting the tables, and locks both tables (reads and writes) while it
-- does: about 2 s a million operations. The two indexes go first, so that
-- neither is rebuilt only to be dropped. A lock request queues every later
-- query of the journal behind it, so the migration waits at most 10 s for
-- its locks (a long transaction in the way) and fails rather than stall
-- the replicas still running; run it again once that transaction is gone.
SET LOCAL lock_timeout = '10s';
DROP INDEX IF EXISTS agent_operation_log_key_c_idx;
DROP INDEX IF EXISTS agent_operation_log_status_idx;
ALTER TABLE agent_operation_log ALTER COLUMN operation_key TYPE text COLLATE "C";
ALTER TABLE agent_operation_attempts ALTER COLUMN operation_key TYPE text COLLATE "C";

-- +goose Down
-- The column's collation first: an index made on the "C" column would not
-- keep a COLLATE "C" of its own.
ALTER TABLE agent_operation_attempts ALTER COLUMN operation_key TYPE text COLLATE "default";
ALTER TABLE agent_operation_log ALTER COLUMN operation_key TYPE text COLLATE "default";
CREATE INDEX agent_operation_log_status_idx
    ON agent_operation_log (status, lease_until);
CREATE INDEX agent_operation_log_key_c_idx
    ON agent_operation_log (operation_key COLLATE "C");
