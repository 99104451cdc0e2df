package postgres

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// The plain reads (Get, FieldDigests, Attempts, the lists, the console's
// journal.Browser and AttemptTraceIDs) are sqljournal.Reader's, on this
// engine's statements and timestamptz columns.

// newReader returns the plain reads sent through s.db.
func (s *Store) newReader() sqljournal.Reader[pgTime, *pgTime] {
	return sqljournal.NewReader[pgTime](s.query, &readSQL, func(t time.Time) any { return t }, searchRanges)
}

// query runs a statement on s.db and hands its rows to read.
func (s *Store) query(ctx context.Context, sql string, args []any, read func(sqljournal.Rows) error) error {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return read(rows)
}

// readStored runs a statement of stored rows (recordColumns) and reads them
// by key.
func (s *Store) readStored(ctx context.Context, sql string, args ...any) (recs map[string]sqljournal.Stored, err error) {
	err = s.query(ctx, sql, args, func(rows sqljournal.Rows) error {
		recs, err = sqljournal.StoredByKey[pgTime](rows)
		return err
	})
	return recs, err
}

// queryKeys runs a statement returning one key per row and marks those keys.
func (s *Store) queryKeys(ctx context.Context, into map[string]bool, sql string, args ...any) error {
	return s.query(ctx, sql, args, func(rows sqljournal.Rows) error { return sqljournal.MarkKeys(rows, into) })
}
