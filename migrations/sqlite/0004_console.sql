-- +goose Up
-- Indexes for the operator's console (package console), as for PostgreSQL
-- (migrations/postgres/0004_console.sql). Keys compare bytewise (BINARY),
-- so an intent's keys are a range of the primary key: no key index here.
CREATE INDEX IF NOT EXISTS agent_operation_log_created_key_idx
    ON agent_operation_log (created_at, operation_key);
CREATE INDEX IF NOT EXISTS agent_operation_log_open_created_idx
    ON agent_operation_log (status, created_at, operation_key)
    WHERE status IN ('started', 'failed_retryable', 'unknown');
CREATE INDEX IF NOT EXISTS agent_operation_log_event_idx
    ON agent_operation_log (event_id) WHERE event_id <> '';
CREATE INDEX IF NOT EXISTS agent_operation_log_object_idx
    ON agent_operation_log (target_object_id) WHERE target_object_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS agent_operation_attempts_finished_idx
    ON agent_operation_attempts (finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP INDEX agent_operation_attempts_finished_idx;
DROP INDEX agent_operation_log_object_idx;
DROP INDEX agent_operation_log_event_idx;
DROP INDEX agent_operation_log_open_created_idx;
DROP INDEX agent_operation_log_created_key_idx;
