-- +goose Up
-- The article's agent_operation_log, plus the lease owner, a fencing token
-- incremented on every claim and take-over, the event and approval that
-- produced the operation, and a counter of reconcile rounds that could not
-- settle an unknown outcome.
CREATE TABLE agent_operation_log (
    operation_key      text PRIMARY KEY,
    operation_type     text NOT NULL,
    request_hash       text NOT NULL,
    status             text NOT NULL
                       CHECK (status IN (
                         'started',
                         'succeeded',
                         'failed_retryable',
                         'failed_final',
                         'unknown'
                       )),
    target_system      text NOT NULL,
    target_object_id   text,
    response_json      jsonb,
    error_code         text,
    attempt_count      integer NOT NULL DEFAULT 1,
    lease_until        timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    completed_at       timestamptz,
    event_id           text NOT NULL DEFAULT '',
    approval_id        text NOT NULL DEFAULT '',
    lease_owner        text,
    lease_token        bigint NOT NULL DEFAULT 1,
    reconcile_rounds   integer NOT NULL DEFAULT 0,
    CHECK (octet_length(operation_key) <= 255),
    CHECK ((completed_at IS NOT NULL) = (status IN ('succeeded', 'failed_final')))
);

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
    operation_key      text NOT NULL
                       REFERENCES agent_operation_log (operation_key) ON DELETE CASCADE,
    attempt            integer NOT NULL,
    lease_token        bigint NOT NULL,
    worker             text NOT NULL,
    kind               text NOT NULL CHECK (kind IN ('execute', 'reconcile', 'operator')),
    started_at         timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz,
    outcome            text,
    error_code         text,
    target_request_id  text,
    note               text,
    PRIMARY KEY (operation_key, lease_token)
);

-- +goose Down
DROP TABLE agent_operation_attempts;
DROP TABLE agent_operation_log;
