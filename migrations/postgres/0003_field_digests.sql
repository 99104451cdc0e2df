-- +goose Up
-- A short digest per significant field of the key's first request, beside
-- its fingerprint (operation.FieldDigests: JSON {"field":"hhhh"}, 16 bits
-- each, salted with the key), so that a conflict can name the fields that
-- differ without the journal holding their values. NULL for rows written
-- before it existed: their conflicts name no fields.
ALTER TABLE agent_operation_log ADD COLUMN field_digests text;

-- +goose Down
ALTER TABLE agent_operation_log DROP COLUMN field_digests;
