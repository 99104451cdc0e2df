-- +goose Up
-- The common operation has one attempt: claimed, executed, completed. Its
-- attempt now lives in the log row itself instead of a row of
-- agent_operation_attempts, so that the claim and the completion each write
-- one row (no second heap row, primary-key entry, foreign-key check and
-- finished_at index entry per operation). first_attempt_inline is true while
-- the row holds its first attempt (execute, attempt 1, lease token 1, by
-- lease_owner, started at created_at); the first_* columns are that
-- attempt's end. The first statement that starts another attempt (a retry,
-- a take-over, a reconciler's scan, an operator's decision) writes the first
-- attempt into the trail and clears the flag, so the trail is one table
-- again from the second attempt on; the readers of the trail read the row's
-- attempt beside the table's.
--
-- Rows written before this migration keep their attempts in the table
-- (the flag defaults to false). Adding columns with constant defaults
-- rewrites nothing.
ALTER TABLE agent_operation_log
    ADD COLUMN first_attempt_inline boolean NOT NULL DEFAULT false,
    ADD COLUMN first_finished_at    timestamptz,
    ADD COLUMN first_outcome        text,
    ADD COLUMN first_error_code     text,
    ADD COLUMN first_request_id     text,
    ADD COLUMN first_note           text,
    ADD COLUMN first_trace_id       text;

-- +goose Down
-- The attempts the rows hold go back into the trail first.
INSERT INTO agent_operation_attempts
    (operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
     outcome, error_code, target_request_id, note, trace_id)
SELECT operation_key, attempt_count, lease_token, coalesce(lease_owner, ''), 'execute', created_at,
       first_finished_at, first_outcome, first_error_code, first_request_id, first_note, first_trace_id
FROM agent_operation_log WHERE first_attempt_inline;
ALTER TABLE agent_operation_log
    DROP COLUMN first_trace_id,
    DROP COLUMN first_note,
    DROP COLUMN first_request_id,
    DROP COLUMN first_error_code,
    DROP COLUMN first_outcome,
    DROP COLUMN first_finished_at,
    DROP COLUMN first_attempt_inline;
