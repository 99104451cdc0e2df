package sqlite

import (
	"context"

	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// The plain reads (Get, FieldDigests, Attempts, the lists, the console's
// journal.Browser and AttemptTraceIDs) are sqljournal.Reader's, on this
// engine's statements and millisecond columns, on the reader pool.

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

// queryKeys runs a statement returning one key per row and marks those keys.
func queryKeys(ctx context.Context, q querier, into map[string]bool, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqljournal.MarkKeys(rows, into)
}
