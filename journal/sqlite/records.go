package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// msTime reads a time column of milliseconds for sqljournal's scans; NULL is
// the zero time.
type msTime struct{ v sql.NullInt64 }

func (t *msTime) Dest() any { return &t.v }

func (t *msTime) Time() time.Time { return fromNullMS(t.v) }

// The scans of this engine's rows.
var (
	scanRecord   = sqljournal.ScanRecord[msTime]
	storedRecord = sqljournal.StoredRecord[msTime]
	scanAttempt  = sqljournal.ScanAttempt[msTime]
	scanHolder   = sqljournal.ScanLeaseHolder[msTime]
)

// readRecords runs a statement of stored rows (recordColumns, lease_live and
// the clock) and reads them by key.
func readRecords(ctx context.Context, q querier, query string, args ...any) (map[string]sqljournal.Stored, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqljournal.StoredByKey[msTime](rows)
}

// collect runs a statement and reads every row with scan.
func collect[R any](ctx context.Context, q querier, scan func(sqljournal.Row) (R, error), query string, args ...any) ([]R, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqljournal.Collect(rows, scan)
}

// queryKeys runs a statement returning one key per row and marks those keys.
func queryKeys(ctx context.Context, q querier, into map[string]bool, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqljournal.MarkKeys(rows, into)
}

// Get returns one operation.
func (s *Store) Get(ctx context.Context, key string) (journal.Record, error) {
	rec, err := storedRecord(s.rd.QueryRowContext(ctx, selectRecord, key))
	if err != nil {
		return journal.Record{}, sqljournal.KeyError("get", key, err, sql.ErrNoRows)
	}
	return rec, nil
}

// FieldDigests implements journal.Store (a rare read: unprepared).
func (s *Store) FieldDigests(ctx context.Context, key string) (string, error) {
	var d string
	err := s.rd.QueryRowContext(ctx, selectFieldDigests, key).Scan(&d)
	return d, sqljournal.KeyError("field digests", key, err, sql.ErrNoRows)
}

// Attempts returns the attempts trail of an operation, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	out, err := collect(ctx, s.rd, scanAttempt, selectAttempts, key)
	if err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	return out, nil
}

// ListUnresolved lists unknown operations that reconciliation could not settle.
func (s *Store) ListUnresolved(ctx context.Context, minRounds, limit int) ([]journal.Record, error) {
	out, err := collect(ctx, s.rd, storedRecord, listUnresolved, minRounds, journal.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list unresolved: %w", err)
	}
	return out, nil
}

// ListIdleRetryable lists retryable failures idle for at least idle.
func (s *Store) ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error) {
	out, err := collect(ctx, s.rd, storedRecord, listIdleRetryable, idle.Milliseconds(), journal.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list idle retryable: %w", err)
	}
	return out, nil
}
