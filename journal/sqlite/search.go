package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// The console's reads (journal.Browser), on the read-only pool. They are
// plain SELECTs served by the indexes of migration 0004_console; times are
// the journal's milliseconds.

var _ journal.Browser = (*Store)(nil)

func browseMS(t time.Time) any { return t.UnixMilli() }

// The searches are static statements, one per kind of search; the filters
// every kind shares are NULL when unset. ?1 status, ?2 operation type, ?3
// from, ?4 to (created_at, ms), ?5 and ?6 the keyset cursor (created_at,
// key), ?7 the page size. The listing pages along (created_at,
// operation_key) backwards: the cursor and the time range bound that index
// scan. The end of the range and the cursor make one upper bound: given
// two, SQLite bounds the scan by one of them, and a deep page with no end
// would walk every newer row (415 ms a page half-way down a million rows).
const searchFilters = `
  AND (?1 IS NULL OR status = ?1)
  AND (?2 IS NULL OR operation_type = ?2)
  AND created_at >= coalesce(?3, -9223372036854775808)
  AND created_at <= min(coalesce(?4 - 1, 9223372036854775807), coalesce(?5, 9223372036854775807))
  AND (?5 IS NULL OR created_at < ?5 OR operation_key < ?6)
ORDER BY created_at DESC, operation_key DESC LIMIT ?7`

const (
	searchAll = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log WHERE true` + searchFilters
	searchKey = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log WHERE operation_key = ?8` + searchFilters
	// searchOpen filters on an open status (started, failed_retryable,
	// unknown) through the partial index of the open operations; a final
	// status, common, is filtered along the time index (searchAll).
	searchOpen = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log
WHERE status = ?8 AND ` + isOpen + searchFilters
	searchEvent  = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log WHERE event_id = ?8 AND event_id <> ''` + searchFilters
	searchObject = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log WHERE target_object_id = ?8 AND target_object_id IS NOT NULL` + searchFilters
	// searchIntent reads each type's key range [lo, hi) (?8: a JSON array
	// of [lo, hi] pairs) on the primary key, then checks that a version (v
	// and 1–9 digits) is all that follows. CROSS JOIN keeps the ranges the
	// outer loop: without statistics SQLite would rather walk the time
	// index and probe every row.
	searchIntent = `SELECT ` + sqljournal.RecordColumns + ` FROM json_each(?8) AS r
CROSS JOIN agent_operation_log ON operation_key >= r.value ->> 0 AND operation_key < r.value ->> 1
WHERE length(substr(operation_key, length(r.value ->> 0) + 1)) BETWEEN 1 AND 9
  AND substr(operation_key, length(r.value ->> 0) + 1) NOT GLOB '*[^0-9]*'` + searchFilters
)

// searches are the statements, by kind.
var searches = [sqljournal.SearchKinds]string{
	sqljournal.SearchAll: searchAll, sqljournal.SearchKey: searchKey, sqljournal.SearchOpen: searchOpen,
	sqljournal.SearchEvent: searchEvent, sqljournal.SearchObject: searchObject, sqljournal.SearchIntent: searchIntent,
}

// searchRanges are the arguments of an intent's key ranges: one JSON array
// of [lo, hi] pairs (?8).
func searchRanges(rs []journal.IntentRange) []any {
	ranges := make([][2]string, 0, len(rs))
	for _, r := range rs {
		ranges = append(ranges, [2]string{r.Lo, r.Hi})
	}
	b, _ := json.Marshal(ranges)
	return []any{string(b)}
}

// ExplainSearch returns SQLite's query plan for q's statement (EXPLAIN
// QUERY PLAN, not run), one step a line: tests check that a search reads
// an index.
func (s *Store) ExplainSearch(ctx context.Context, q journal.SearchQuery) (string, error) {
	return s.Reader.ExplainSearch(ctx, q, "EXPLAIN QUERY PLAN ", func(row sqljournal.Row) (detail string, err error) {
		var id, parent, notused int64
		err = row.Scan(&id, &parent, &notused, &detail)
		return detail, err
	})
}
