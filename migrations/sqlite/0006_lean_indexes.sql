-- +goose Up
-- The status index of every row goes, as on PostgreSQL (0006 there): what
-- read it (the reconciler's scans of unknown outcomes, expired leases, idle
-- retryable failures and lease holders) reads the partial index of the open
-- operations of 0004, which holds the work in flight only, so a claim and
-- its completion write one index entry fewer each. Keys compare bytewise
-- here already (BINARY).
DROP INDEX IF EXISTS agent_operation_log_status_idx;

-- +goose Down
CREATE INDEX agent_operation_log_status_idx
    ON agent_operation_log (status, lease_until);
