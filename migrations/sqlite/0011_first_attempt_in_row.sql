-- +goose Up
-- On PostgreSQL, version 11 keeps an operation's first attempt in its log
-- row, so that the common case (one attempt) writes one row at the claim
-- and one at the completion. SQLite keeps every attempt in
-- agent_operation_attempts: its journal is one process's file, where a
-- second row in the same transaction costs no round trip, no foreign-key
-- lookup over the network and no commit of its own. The version is taken
-- here too so that both engines' histories stay numbered alike.
SELECT 1;

-- +goose Down
SELECT 1;
