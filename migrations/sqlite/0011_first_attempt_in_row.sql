-- +goose Up
-- The common operation has one attempt: claimed, executed, completed. Its
-- attempt now lives in the log row instead of a row of
-- agent_operation_attempts, so that the claim inserts one row and the
-- completion updates it. first_attempt_inline is 1 while the row holds its
-- first attempt (execute, attempt 1, lease token 1, by lease_owner, started
-- at created_at); the first_* columns are that attempt's end. The first
-- statement that starts another attempt (a retry, a take-over, a
-- reconciler's scan, an operator's decision) writes the first attempt into
-- the trail and clears the flag; the trail's readers read both. Rows written
-- before this migration keep their attempts in the table (the flag
-- defaults to 0).
ALTER TABLE agent_operation_log ADD COLUMN first_attempt_inline INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_operation_log ADD COLUMN first_finished_at INTEGER;
ALTER TABLE agent_operation_log ADD COLUMN first_outcome TEXT;
ALTER TABLE agent_operation_log ADD COLUMN first_error_code TEXT;
ALTER TABLE agent_operation_log ADD COLUMN first_request_id TEXT;
ALTER TABLE agent_operation_log ADD COLUMN first_note TEXT;
ALTER TABLE agent_operation_log ADD COLUMN first_trace_id TEXT;

-- +goose Down
-- The attempts the rows hold go back into the trail first.
INSERT INTO agent_operation_attempts
    (operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
     outcome, error_code, target_request_id, note, trace_id)
SELECT operation_key, attempt_count, lease_token, coalesce(lease_owner, ''), 'execute', created_at,
       first_finished_at, first_outcome, first_error_code, first_request_id, first_note, first_trace_id
FROM agent_operation_log WHERE first_attempt_inline;
ALTER TABLE agent_operation_log DROP COLUMN first_trace_id;
ALTER TABLE agent_operation_log DROP COLUMN first_note;
ALTER TABLE agent_operation_log DROP COLUMN first_request_id;
ALTER TABLE agent_operation_log DROP COLUMN first_error_code;
ALTER TABLE agent_operation_log DROP COLUMN first_outcome;
ALTER TABLE agent_operation_log DROP COLUMN first_finished_at;
ALTER TABLE agent_operation_log DROP COLUMN first_attempt_inline;
