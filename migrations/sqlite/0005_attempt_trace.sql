-- +goose Up
-- The OpenTelemetry trace id of the delivery that made an attempt, when
-- tracing was on (NULL otherwise): `idemgate trace KEY` names each
-- attempt's trace. Written after the attempt started, never read on the
-- daemon's path.
ALTER TABLE agent_operation_attempts ADD COLUMN trace_id text;

-- +goose Down
ALTER TABLE agent_operation_attempts DROP COLUMN trace_id;
