-- +goose Up
-- Business processes: one row per process, keyed like an operation
-- (<env>:process.<name>:<intent>:<version>). The steps and compensations
-- are ordinary operations with rows of their own in agent_operation_log
-- (their keys derive from the process's); this row records where the
-- process stands and who coordinates it, under a lease with a fencing
-- token as for operations. No payload value is kept: the input waits in
-- JetStream with the process command.
CREATE TABLE process_log (
    process_key        text COLLATE "C" PRIMARY KEY,
    process_name       text NOT NULL,
    request_hash       text NOT NULL,
    definition_digest  text NOT NULL,
    status             text NOT NULL
                       CHECK (status IN ('running', 'succeeded', 'compensating', 'compensated', 'needs_review')),
    step               integer NOT NULL DEFAULT 0 CHECK (step >= -1),
    failed_step        text NOT NULL DEFAULT '',
    error_code         text NOT NULL DEFAULT '',
    event_id           text NOT NULL DEFAULT '',
    approval_id        text NOT NULL DEFAULT '',
    lease_owner        text,
    lease_token        bigint NOT NULL DEFAULT 1,
    lease_until        timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    completed_at       timestamptz,
    CHECK (octet_length(process_key) <= 255),
    CHECK ((completed_at IS NOT NULL) = (status IN ('succeeded', 'compensated', 'needs_review')))
);

-- The processes still moving or waiting for a person, oldest first: the
-- start-up check of running processes and trace --unresolved read it.
CREATE INDEX process_log_open_idx
    ON process_log (created_at)
    WHERE status IN ('running', 'compensating', 'needs_review');

-- The declarations processes started on, by digest: a running process
-- finishes on its own definition whatever the configuration says later.
CREATE TABLE process_definitions (
    definition_digest  text PRIMARY KEY,
    process_name       text NOT NULL,
    body               text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE process_definitions;
DROP TABLE process_log;
