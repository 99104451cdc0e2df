-- +goose Up
-- Pre-signed approval tokens, as on PostgreSQL (0009 there): a vote given
-- by a token keeps the token's id (jti); one issuer's jti approves one
-- intent.
ALTER TABLE agent_operation_approval_votes ADD COLUMN token_id TEXT
    CHECK (token_id IS NULL OR length(CAST(token_id AS BLOB)) BETWEEN 1 AND 128);
CREATE UNIQUE INDEX agent_operation_approval_votes_token_idx
    ON agent_operation_approval_votes (approver, token_id) WHERE token_id IS NOT NULL;

-- +goose Down
DROP INDEX agent_operation_approval_votes_token_idx;
ALTER TABLE agent_operation_approval_votes DROP COLUMN token_id;
