package sqlite

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/journal"
)

var _ journal.AttemptTraces = (*Store)(nil)

// SetAttemptTrace records the trace id of the attempt of key under token.
func (s *Store) SetAttemptTrace(ctx context.Context, key string, token int64, traceID string) error {
	// In the row while it holds that attempt as its first, else in the trail.
	res, err := s.w.ExecContext(ctx, `UPDATE agent_operation_log SET first_trace_id = ?3
WHERE operation_key = ?1 AND first_attempt_inline AND lease_token = ?2`, key, token, traceID)
	if err != nil {
		return fmt.Errorf("attempt trace %s: %w", key, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return nil
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE agent_operation_attempts SET trace_id = ?3
WHERE operation_key = ?1 AND lease_token = ?2`, key, token, traceID); err != nil {
		return fmt.Errorf("attempt trace %s: %w", key, err)
	}
	return nil
}
