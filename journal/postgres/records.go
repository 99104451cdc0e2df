package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/jackc/pgx/v5"
)

type storedRecord struct {
	journal.Record
	leaseLive bool
	now       time.Time // the database clock of the read
}

func scanRecords(rows pgx.Rows, err error) (map[string]storedRecord, error) {
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

func scanRecord(row pgx.Row) (storedRecord, error) {
	var (
		r                 storedRecord
		status            string
		result            []byte
		leaseUntil        *time.Time
		completedAt       *time.Time
		raisedAt          *time.Time
		createdAt, update time.Time
	)
	err := row.Scan(&r.Key, &r.OperationType, &r.RequestHash, &status, &r.TargetSystem,
		&r.TargetObjectID, &result, &r.ErrorCode, &r.AttemptCount,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, &leaseUntil,
		&r.ReconcileRounds, &createdAt, &update, &completedAt,
		&r.ReconcileRoundsTotal, &raisedAt, &r.EffectPossible, &r.leaseLive, &r.now)
	if err != nil {
		return r, err
	}
	r.Status = journal.Status(status)
	if len(result) > 0 {
		r.Result = json.RawMessage(result)
	}
	r.CreatedAt, r.UpdatedAt = createdAt, update
	if leaseUntil != nil {
		r.LeaseUntil = *leaseUntil
	}
	if completedAt != nil {
		r.CompletedAt = *completedAt
	}
	if raisedAt != nil {
		r.RaisedAt = *raisedAt
	}
	return r, nil
}

// queryKeys runs a statement returning one key per row and marks those keys.
func (s *Store) queryKeys(ctx context.Context, into map[string]bool, sql string, args ...any) error {
	rows, err := s.db.Query(ctx, sql, args...)
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
	rec, err := scanRecord(s.db.QueryRow(ctx, selectRecord, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, err)
	}
	return rec.Record, nil
}

// FieldDigests implements journal.Store.
func (s *Store) FieldDigests(ctx context.Context, key string) (string, error) {
	var d string
	err := s.db.QueryRow(ctx, selectFieldDigests, key).Scan(&d)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("field digests %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("field digests %s: %w", key, err)
	}
	return d, nil
}

// Attempts returns the attempts trail of an operation, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	rows, err := s.db.Query(ctx, selectAttempts, key)
	if err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	defer rows.Close()
	var out []journal.Attempt
	for rows.Next() {
		var a journal.Attempt
		var finished *time.Time
		var outcome string
		if err := rows.Scan(&a.Key, &a.Attempt, &a.Token, &a.Worker, &a.Kind, &a.StartedAt, &finished,
			&outcome, &a.ErrorCode, &a.TargetRequestID, &a.Note); err != nil {
			return nil, fmt.Errorf("attempts %s: %w", key, err)
		}
		a.Outcome = journal.AttemptOutcome(outcome)
		if finished != nil {
			a.FinishedAt = *finished
		}
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
	rows, err := s.db.Query(ctx, listUnresolved, minRounds, limit)
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
	return out, rows.Err()
}

// ListIdleRetryable lists retryable failures idle for at least idle.
func (s *Store) ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error) {
	limit = journal.ListLimit(limit)
	rows, err := s.db.Query(ctx, listIdleRetryable, idle.Milliseconds(), limit)
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
	return out, rows.Err()
}
