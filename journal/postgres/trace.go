package postgres

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/journal"
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
