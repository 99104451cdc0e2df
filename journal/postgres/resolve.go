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
// The row is locked, then read (resolveLock explains why apart),
// journal.Resolution.Applies decides (the rule SQLite applies too), and the
// decision is written, in one transaction.
func (s *Store) Resolve(ctx context.Context, r journal.Resolution) (journal.Record, error) {
	if err := r.Validate(); err != nil {
		return journal.Record{}, err
	}
	var done bool
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) (err error) {
		done, err = sqljournal.ApplyResolution(r, func() (row sqljournal.ResolveRow, err error) {
			var one int
			if err = tx.QueryRow(ctx, resolveLock, r.Key).Scan(&one); err == nil {
				err = tx.QueryRow(ctx, resolveCheck, r.Key).Scan(&row.Status, &row.Owner, &row.Live)
			}
			if errors.Is(err, pgx.ErrNoRows) {
				return row, nil
			}
			row.Found = err == nil
			return row, err
		}, func(note string) error {
			var key string // ErrNoRows included: the locked row cannot have gone
			return tx.QueryRow(ctx, resolve, r.Key, string(r.Status), r.TargetObjectID, r.ErrorCode, r.Operator, note).Scan(&key)
		})
		return err
	})
	return sqljournal.Resolved(ctx, r.Key, err, done, s.Get)
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
