package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
)

type storedRecord struct {
	journal.Record
	leaseLive bool
	now       time.Time // the clock the read judged the lease by
}

func readRecords(ctx context.Context, q querier, query string, args ...any) (map[string]storedRecord, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]storedRecord)
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out[rec.Key] = rec
	}
	return out, rows.Err()
}

type scanner interface {
	Scan(dest ...any) error
}

func scanRecord(row scanner) (storedRecord, error) {
	var (
		r                                 storedRecord
		status                            string
		result                            []byte
		leaseUntil, completedAt, raisedAt sql.NullInt64
		createdAt, updatedAt, leaseLiv    int64
		effect, now                       int64
	)
	err := row.Scan(&r.Key, &r.OperationType, &r.RequestHash, &status, &r.TargetSystem,
		&r.TargetObjectID, &result, &r.ErrorCode, &r.AttemptCount,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, &leaseUntil,
		&r.ReconcileRounds, &createdAt, &updatedAt, &completedAt,
		&r.ReconcileRoundsTotal, &raisedAt, &effect, &leaseLiv, &now)
	if err != nil {
		return r, err
	}
	r.RaisedAt, r.EffectPossible, r.now = fromNullMS(raisedAt), effect != 0, fromMS(now)
	r.Status = journal.Status(status)
	if len(result) > 0 {
		r.Result = result
	}
	r.CreatedAt, r.UpdatedAt = fromMS(createdAt), fromMS(updatedAt)
	r.LeaseUntil, r.CompletedAt = fromNullMS(leaseUntil), fromNullMS(completedAt)
	r.leaseLive = leaseLiv != 0
	return r, nil
}

// queryKeys runs a statement returning one key per row and marks those keys.
func queryKeys(ctx context.Context, q querier, into map[string]bool, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return err
		}
		into[k] = true
	}
	return rows.Err()
}

// Get returns one operation.
func (s *Store) Get(ctx context.Context, key string) (journal.Record, error) {
	rec, err := scanRecord(s.rd.QueryRowContext(ctx, selectRecord, key))
	if errors.Is(err, sql.ErrNoRows) {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, err)
	}
	return rec.Record, nil
}

// FieldDigests implements journal.Store (a rare read: unprepared).
func (s *Store) FieldDigests(ctx context.Context, key string) (string, error) {
	var d string
	err := s.rd.QueryRowContext(ctx, selectFieldDigests, key).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("field digests %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("field digests %s: %w", key, err)
	}
	return d, nil
}

// Attempts returns the attempts trail of an operation, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	rows, err := s.rd.QueryContext(ctx, selectAttempts, key)
	if err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	defer rows.Close()
	var out []journal.Attempt
	for rows.Next() {
		var a journal.Attempt
		var started int64
		var finished sql.NullInt64
		var outcome string
		if err := rows.Scan(&a.Key, &a.Attempt, &a.Token, &a.Worker, &a.Kind, &started, &finished,
			&outcome, &a.ErrorCode, &a.TargetRequestID, &a.Note); err != nil {
			return nil, fmt.Errorf("attempts %s: %w", key, err)
		}
		a.StartedAt, a.FinishedAt = fromMS(started), fromNullMS(finished)
		a.Outcome = journal.AttemptOutcome(outcome)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	return out, nil
}

// ListUnresolved lists unknown operations that reconciliation could not settle.
func (s *Store) ListUnresolved(ctx context.Context, minRounds, limit int) ([]journal.Record, error) {
	limit = journal.ListLimit(limit)
	rows, err := s.rd.QueryContext(ctx, listUnresolved, minRounds, limit)
	if err != nil {
		return nil, fmt.Errorf("list unresolved: %w", err)
	}
	defer rows.Close()
	var out []journal.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("list unresolved: %w", err)
		}
		out = append(out, rec.Record)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list unresolved: %w", err)
	}
	return out, nil
}

// ListIdleRetryable lists retryable failures idle for at least idle.
func (s *Store) ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error) {
	limit = journal.ListLimit(limit)
	rows, err := s.rd.QueryContext(ctx, listIdleRetryable, idle.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("list idle retryable: %w", err)
	}
	defer rows.Close()
	var out []journal.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("list idle retryable: %w", err)
		}
		out = append(out, rec.Record)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list idle retryable: %w", err)
	}
	return out, nil
}
