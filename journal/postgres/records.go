package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// pgTime reads a timestamptz column for sqljournal's scans; NULL is the
// zero time.
type pgTime struct{ v pgtype.Timestamptz }

func (t *pgTime) Dest() any { return &t.v }

func (t *pgTime) Time() time.Time {
	if !t.v.Valid {
		return time.Time{}
	}
	return t.v.Time
}

// The scans of this engine's rows.
var (
	scanRecord   = sqljournal.ScanRecord[pgTime]
	storedRecord = sqljournal.StoredRecord[pgTime]
	scanAttempt  = sqljournal.ScanAttempt[pgTime]
	scanHolder   = sqljournal.ScanLeaseHolder[pgTime]
)

// collect runs a statement and reads every row with scan.
func collect[R any](ctx context.Context, db querier, scan func(sqljournal.Row) (R, error), sql string, args ...any) ([]R, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqljournal.Collect(rows, scan)
}

// readStored runs a statement of stored rows (recordColumns) and reads them
// by key.
func (s *Store) readStored(ctx context.Context, sql string, args ...any) (map[string]sqljournal.Stored, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqljournal.StoredByKey[pgTime](rows)
}

// queryKeys runs a statement returning one key per row and marks those keys.
func (s *Store) queryKeys(ctx context.Context, into map[string]bool, sql string, args ...any) error {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqljournal.MarkKeys(rows, into)
}

// Get returns one operation.
func (s *Store) Get(ctx context.Context, key string) (journal.Record, error) {
	rec, err := storedRecord(s.db.QueryRow(ctx, selectRecord, key))
	if err != nil {
		return journal.Record{}, sqljournal.KeyError("get", key, err, pgx.ErrNoRows)
	}
	return rec, nil
}

// FieldDigests implements journal.Store.
func (s *Store) FieldDigests(ctx context.Context, key string) (string, error) {
	var d string
	err := s.db.QueryRow(ctx, selectFieldDigests, key).Scan(&d)
	return d, sqljournal.KeyError("field digests", key, err, pgx.ErrNoRows)
}

// Attempts returns the attempts trail of an operation, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	out, err := collect(ctx, s.db, scanAttempt, selectAttempts, key)
	if err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	return out, nil
}

// ListUnresolved lists unknown operations that reconciliation could not settle.
func (s *Store) ListUnresolved(ctx context.Context, minRounds, limit int) ([]journal.Record, error) {
	out, err := collect(ctx, s.db, storedRecord, listUnresolved, minRounds, journal.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list unresolved: %w", err)
	}
	return out, nil
}

// ListIdleRetryable lists retryable failures idle for at least idle.
func (s *Store) ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error) {
	out, err := collect(ctx, s.db, storedRecord, listIdleRetryable, idle.Milliseconds(), journal.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list idle retryable: %w", err)
	}
	return out, nil
}
