package postgres

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

var _ journal.AttemptTraces = (*Store)(nil)

// SetAttemptTrace records the trace id of the attempt of key under token.
func (s *Store) SetAttemptTrace(ctx context.Context, key string, token int64, traceID string) error {
	if _, err := s.db.Exec(ctx, `UPDATE agent_operation_attempts SET trace_id = $3
WHERE operation_key = $1 AND lease_token = $2`, key, token, traceID); err != nil {
		return fmt.Errorf("attempt trace %s: %w", key, err)
	}
	return nil
}

// AttemptTraceIDs returns the recorded trace ids of key's attempts by token.
func (s *Store) AttemptTraceIDs(ctx context.Context, key string) (map[int64]string, error) {
	rows, err := s.db.Query(ctx, `SELECT lease_token, trace_id FROM agent_operation_attempts
WHERE operation_key = $1 AND trace_id IS NOT NULL`, key)
	if err != nil {
		return nil, fmt.Errorf("attempt traces %s: %w", key, err)
	}
	defer rows.Close()
	out, err := sqljournal.TraceIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("attempt traces %s: %w", key, err)
	}
	return out, nil
}
