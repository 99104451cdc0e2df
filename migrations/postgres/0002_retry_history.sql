-- +goose Up
-- The history an operator needs once an outcome is settled, and a closed
-- attempts trail.
--
--   * reconcile_rounds_total counts every unsettled lookup the operation ever
--     had (reconcile_rounds restarts at 0 once the outcome is settled);
--     raised_at is when it was first raised for an operator's review.
--   * effect_possible is set once an attempt's outcome was unknown: the
--     target may hold the object whatever later attempts answered, so the
--     operation is looked up before it may end failed_final.
--   * A failed_retryable row's lease_until is its hold: the next attempt's
--     "not before" on the database clock (no new column).
--   * Attempt outcomes are a closed set: the statuses a completion records,
--     plus fenced (the worker came back after its lease was taken over) and
--     abandoned (the lease was taken over while the attempt was open).
--     Attempts left open by earlier versions under a superseded token are
--     closed as abandoned here.
ALTER TABLE agent_operation_log
    ADD COLUMN reconcile_rounds_total integer NOT NULL DEFAULT 0,
    ADD COLUMN raised_at              timestamptz,
    ADD COLUMN effect_possible        boolean NOT NULL DEFAULT false;

UPDATE agent_operation_log SET reconcile_rounds_total = reconcile_rounds WHERE reconcile_rounds > 0;

UPDATE agent_operation_log l SET effect_possible = true
WHERE l.status = 'unknown'
   OR EXISTS (SELECT 1 FROM agent_operation_attempts a
              WHERE a.operation_key = l.operation_key AND a.outcome = 'unknown');

UPDATE agent_operation_attempts a SET finished_at = now(), outcome = 'abandoned'
FROM agent_operation_log l
WHERE a.operation_key = l.operation_key
  AND a.finished_at IS NULL
  AND a.lease_token < l.lease_token;

ALTER TABLE agent_operation_attempts
    ADD CONSTRAINT agent_operation_attempts_outcome_check CHECK (outcome IN (
        'succeeded', 'failed_retryable', 'failed_final', 'unknown', 'fenced', 'abandoned')),
    ADD CONSTRAINT agent_operation_attempts_closed_check CHECK ((finished_at IS NULL) = (outcome IS NULL));

-- +goose Down
ALTER TABLE agent_operation_attempts
    DROP CONSTRAINT agent_operation_attempts_closed_check,
    DROP CONSTRAINT agent_operation_attempts_outcome_check;
UPDATE agent_operation_attempts SET finished_at = NULL, outcome = NULL
WHERE outcome IN ('fenced', 'abandoned');
ALTER TABLE agent_operation_log
    DROP COLUMN effect_possible,
    DROP COLUMN raised_at,
    DROP COLUMN reconcile_rounds_total;
