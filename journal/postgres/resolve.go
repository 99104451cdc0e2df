package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// Resolve records an operator's decision on an operation that is not final.
// The row is read and locked, journal.Resolution.Applies decides (the rule
// SQLite applies too), and the decision is written, in one transaction.
func (s *Store) Resolve(ctx context.Context, r journal.Resolution) (journal.Record, error) {
	if err := r.Validate(); err != nil {
		return journal.Record{}, err
	}
	var done bool
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		done = false
		var status, owner string
		var live bool
		err := tx.QueryRow(ctx, resolveCheck, r.Key).Scan(&status, &owner, &live)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if !r.Applies(journal.Status(status), live) {
			return nil
		}
		var key string
		if err := tx.QueryRow(ctx, resolve, r.Key, string(r.Status), r.TargetObjectID, r.ErrorCode, r.Operator, r.TrailNote(live, owner)).Scan(&key); err != nil {
			return err // ErrNoRows included: the locked row cannot have gone
		}
		done = true
		return nil
	})
	if err != nil {
		return journal.Record{}, fmt.Errorf("resolve %s: %w", r.Key, err)
	}
	rec, err := s.Get(ctx, r.Key)
	return sqljournal.Resolved(rec, err, done)
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
