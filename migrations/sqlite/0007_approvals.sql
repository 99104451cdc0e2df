-- +goose Up
-- Approvals, as on PostgreSQL (0007 there): an intent the approval policy
-- gates waits here for a person before it has a row in
-- agent_operation_log. Times are INTEGER milliseconds, as everywhere here.
CREATE TABLE agent_operation_approvals (
    operation_key    TEXT PRIMARY KEY,
    operation_type   TEXT NOT NULL,
    request_hash     TEXT NOT NULL,
    target_system    TEXT NOT NULL,
    event_id         TEXT NOT NULL DEFAULT '',
    requested_by     TEXT NOT NULL DEFAULT '',
    display          TEXT NOT NULL CHECK (json_valid(display)),
    approvers        INTEGER NOT NULL CHECK (approvers BETWEEN 1 AND 5),
    state            TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
    requested_at     INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    decided_at       INTEGER,
    released_at      INTEGER,
    CHECK (length(CAST(operation_key AS BLOB)) <= 255),
    CHECK ((decided_at IS NULL) = (state = 'pending'))
) STRICT;

CREATE INDEX agent_operation_approvals_pending_idx
    ON agent_operation_approvals (expires_at) WHERE state = 'pending';
CREATE INDEX agent_operation_approvals_release_idx
    ON agent_operation_approvals (decided_at) WHERE state <> 'pending' AND released_at IS NULL;

CREATE TABLE agent_operation_approval_votes (
    operation_key    TEXT NOT NULL
                     REFERENCES agent_operation_approvals (operation_key) ON DELETE CASCADE,
    approver         TEXT NOT NULL,
    vote             TEXT NOT NULL CHECK (vote IN ('approve', 'deny')),
    reason           TEXT NOT NULL,
    request_hash     TEXT NOT NULL,
    decided_at       INTEGER NOT NULL,
    PRIMARY KEY (operation_key, approver)
) STRICT;

-- +goose Down
DROP TABLE agent_operation_approval_votes;
DROP TABLE agent_operation_approvals;
