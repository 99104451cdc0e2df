-- +goose Up
-- Approvals: an intent the approval policy gates waits here for a person
-- before it has a row in agent_operation_log (no attempt, no lease, no
-- retry budget). One record per operation key: the request (what the
-- approver sees: the significant fields, masked; never free text or
-- secrets), who asked, how many distinct approvers it needs, until when,
-- and its state. A denial or an expiry writes the log row it ends in
-- (failed_final) in the same transaction; an approval lets the next claim
-- insert the log row as for any new key. The payload is never stored.
CREATE TABLE agent_operation_approvals (
    operation_key    text COLLATE "C" PRIMARY KEY,
    operation_type   text NOT NULL,
    request_hash     text NOT NULL,
    target_system    text NOT NULL,
    event_id         text NOT NULL DEFAULT '',
    requested_by     text NOT NULL DEFAULT '',
    display          jsonb NOT NULL,
    approvers        integer NOT NULL CHECK (approvers BETWEEN 1 AND 5),
    state            text NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
    requested_at     timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    decided_at       timestamptz,
    released_at      timestamptz,
    CHECK (octet_length(operation_key) <= 255),
    CHECK ((decided_at IS NULL) = (state = 'pending'))
);

-- The sweeper's two scans: pending records by wait limit, decided records
-- whose parked command is not handed back yet.
CREATE INDEX agent_operation_approvals_pending_idx
    ON agent_operation_approvals (expires_at) WHERE state = 'pending';
CREATE INDEX agent_operation_approvals_release_idx
    ON agent_operation_approvals (decided_at) WHERE state <> 'pending' AND released_at IS NULL;

-- Each decision: who, when, why, and the fingerprint it covers. One per
-- approver and operation: approvers are distinct people.
CREATE TABLE agent_operation_approval_votes (
    operation_key    text COLLATE "C" NOT NULL
                     REFERENCES agent_operation_approvals (operation_key) ON DELETE CASCADE,
    approver         text NOT NULL,
    vote             text NOT NULL CHECK (vote IN ('approve', 'deny')),
    reason           text NOT NULL,
    request_hash     text NOT NULL,
    decided_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (operation_key, approver)
);

-- +goose Down
DROP TABLE agent_operation_approval_votes;
DROP TABLE agent_operation_approvals;
