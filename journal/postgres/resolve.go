package postgres

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// Resolve records an operator's decision on an operation that is not final.
func (s *Store) Resolve(ctx context.Context, r journal.Resolution) (journal.Record, error) {
	if err := r.Validate(); err != nil {
		return journal.Record{}, err
	}
	done := make(map[string]bool, 1)
	if err := s.queryKeys(ctx, done, resolve, r.Key, string(r.Status), r.TargetObjectID, r.ErrorCode, r.Operator, r.Evidence, r.Force); err != nil {
		return journal.Record{}, fmt.Errorf("resolve %s: %w", r.Key, err)
	}
	rec, err := s.Get(ctx, r.Key)
	return sqljournal.Resolved(rec, err, done[r.Key])
}

// RaiseForReview marks unknown operations raised for review, once each.
func (s *Store) RaiseForReview(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	marked := make(map[string]bool, len(keys))
	if err := s.queryKeys(ctx, marked, raiseForReview, keys); err != nil {
		return nil, fmt.Errorf("raise for review: %w", err)
	}
	return journal.InOrder(keys, marked), nil
}
