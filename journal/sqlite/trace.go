package sqlite

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/journal"
)

var _ journal.AttemptTraces = (*Store)(nil)

// SetAttemptTrace records the trace id of the attempt of key under token.
func (s *Store) SetAttemptTrace(ctx context.Context, key string, token int64, traceID string) error {
	// In the row while it holds its first attempt, else in the trail.
	for _, q := range []string{`UPDATE agent_operation_log SET first_trace_id = ?3
WHERE operation_key = ?1 AND first_attempt_inline AND lease_token = ?2`,
		`UPDATE agent_operation_attempts SET trace_id = ?3
WHERE operation_key = ?1 AND lease_token = ?2`} {
		if _, err := s.w.ExecContext(ctx, q, key, token, traceID); err != nil {
			return fmt.Errorf("attempt trace %s: %w", key, err)
		}
	}
	return nil
}
