package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// Resolve records an operator's decision on an operation that is not final.
// The row is checked and changed in one write transaction.
func (s *Store) Resolve(ctx context.Context, r journal.Resolution) (journal.Record, error) {
	if err := r.Validate(); err != nil {
		return journal.Record{}, err
	}
	if err := checkTexts(r.Key, "key", r.Key, "target object id", r.TargetObjectID, "error code", r.ErrorCode,
		"evidence", r.Evidence, "operator", r.Operator); err != nil {
		return journal.Record{}, err
	}
	var done bool
	err := s.write(ctx, func(tx *writeTx) (err error) {
		done, err = sqljournal.ApplyResolution(r, func() (row sqljournal.ResolveRow, err error) {
			err = tx.QueryRowContext(ctx, resolveCheck, r.Key, tx.now).Scan(&row.Status, &row.Owner, &row.Live)
			if errors.Is(err, sql.ErrNoRows) {
				return row, nil
			}
			row.Found = err == nil
			return row, err
		}, func(note string) error {
			if err := moveFirst(ctx, tx, newBatchJSON(1, 0).keys(r.Key)); err != nil {
				return err
			}
			var attempt, token int64
			err := tx.QueryRowContext(ctx, resolve, r.Key, string(r.Status), r.TargetObjectID, r.ErrorCode, r.Operator, tx.now).Scan(&attempt, &token)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, resolveAttempt, r.Key, attempt, token, r.Operator, tx.now, string(r.Status), r.ErrorCode, note); err != nil {
				return fmt.Errorf("attempt: %w", err)
			}
			if _, err := tx.ExecContext(ctx, abandonAttempts, newBatchJSON(1, 0).keys(r.Key), tx.now); err != nil {
				return fmt.Errorf("abandoned attempts: %w", err)
			}
			return nil
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
	j := newBatchJSON(len(keys), 48)
	for _, k := range keys {
		if err := checkText(k, "key", k); err != nil {
			return nil, err
		}
		j.key(k)
	}
	arg := j.String()
	marked := make(map[string]bool, len(keys))
	err := s.write(ctx, func(tx *writeTx) error {
		clear(marked)
		return queryKeys(ctx, tx, marked, raiseForReview, arg, tx.now)
	})
	if err != nil {
		return nil, fmt.Errorf("raise for review: %w", err)
	}
	return journal.InOrder(keys, marked), nil
}
