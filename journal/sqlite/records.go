package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// The plain reads (Get, FieldDigests, Attempts, the lists, the console's
// journal.Browser and AttemptTraceIDs) are sqljournal.Reader's, on this
// engine's statements and millisecond columns, on the reader pool.

// msTime reads a time column of milliseconds for sqljournal's scans; NULL is
// the zero time.
type msTime struct{ v sql.NullInt64 }

func (t *msTime) Dest() any { return &t.v }

func (t *msTime) Time() time.Time { return fromNullMS(t.v) }

// readSQL are the statements of the plain reads.
var readSQL = sqljournal.ReadSQL{
	Record:            selectRecord,
	FieldDigests:      selectFieldDigests,
	Attempts:          selectAttempts,
	ListUnresolved:    listUnresolved,
	ListIdleRetryable: listIdleRetryable,
	AttemptCounts:     attemptCounts,
	LeaseHolders:      leaseHolders,
	TraceIDs:          traceIDs,
	Searches:          searches,
}

// newReader returns the plain reads on the reader pool rd.
func newReader(rd readDB) sqljournal.Reader[msTime, *msTime] {
	query := func(ctx context.Context, query string, args []any, read func(sqljournal.Rows) error) error {
		rows, err := rd.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return read(rows)
	}
	return sqljournal.NewReader[msTime](query, &readSQL, browseMS, searchRanges)
}

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
