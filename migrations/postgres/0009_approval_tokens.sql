-- +goose Up
-- Pre-signed approval tokens: a decision given by a token the business's
-- own system signed keeps the token's id (jti), so that one token approves
-- one intent. The approver of such a vote is the token's issuer; a jti
-- reused by the same issuer for another intent is refused (the unique
-- index below, checked first under the record's lock). Votes of people
-- have no token id.
ALTER TABLE agent_operation_approval_votes ADD COLUMN token_id text;
ALTER TABLE agent_operation_approval_votes ADD CONSTRAINT agent_operation_approval_votes_token_id_len
    CHECK (token_id IS NULL OR octet_length(token_id) BETWEEN 1 AND 128);
CREATE UNIQUE INDEX agent_operation_approval_votes_token_idx
    ON agent_operation_approval_votes (approver, token_id) WHERE token_id IS NOT NULL;

-- +goose Down
DROP INDEX agent_operation_approval_votes_token_idx;
ALTER TABLE agent_operation_approval_votes DROP CONSTRAINT agent_operation_approval_votes_token_id_len;
ALTER TABLE agent_operation_approval_votes DROP COLUMN token_id;
