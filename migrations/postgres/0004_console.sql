-- +goose Up
-- Indexes for the operator's console (package console): its searches read
-- one page by keyset, newest first, on a journal of millions of rows.
--
--   * (created_at, operation_key) pages every listing and bounds a time
--     range; a type filter rides on it.
--   * (status, created_at, operation_key) of the open operations (started,
--     failed_retryable, unknown) pages a filter on those statuses, the rare
--     ones operators look for, which a walk of the time index would read
--     thousands of rows to find. Partial: an operation leaves it when it
--     ends, so it stays as small as the work in flight.
--   * event_id and target_object_id find an operation from what an agent
--     or the target shows (partial: most rows have no object while open).
--   * operation_key COLLATE "C" finds an intent's keys by range
--     (env:type:intent:v…) whatever the database's collation.
--   * attempts by finished_at count the last hour's outcomes.
--
-- Building an index holds the table's writes for as long as it takes. On a
-- large journal, create them beforehand without blocking writes (the same
-- statements with CREATE INDEX CONCURRENTLY IF NOT EXISTS, outside a
-- transaction); this migration then finds them and skips them.
CREATE INDEX IF NOT EXISTS agent_operation_log_created_key_idx
    ON agent_operation_log (created_at, operation_key);
CREATE INDEX IF NOT EXISTS agent_operation_log_open_created_idx
    ON agent_operation_log (status, created_at, operation_key)
    WHERE status IN ('started', 'failed_retryable', 'unknown');
CREATE INDEX IF NOT EXISTS agent_operation_log_event_idx
    ON agent_operation_log (event_id) WHERE event_id <> '';
CREATE INDEX IF NOT EXISTS agent_operation_log_object_idx
    ON agent_operation_log (target_object_id) WHERE target_object_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS agent_operation_log_key_c_idx
    ON agent_operation_log (operation_key COLLATE "C");
CREATE INDEX IF NOT EXISTS agent_operation_attempts_finished_idx
    ON agent_operation_attempts (finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP INDEX agent_operation_attempts_finished_idx;
DROP INDEX agent_operation_log_key_c_idx;
DROP INDEX agent_operation_log_object_idx;
DROP INDEX agent_operation_log_event_idx;
DROP INDEX agent_operation_log_open_created_idx;
DROP INDEX agent_operation_log_created_key_idx;
