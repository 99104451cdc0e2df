package postgres

import (
	"context"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// The console's reads (journal.Browser). They are plain SELECTs served by
// the indexes of migration 0004_console.

var _ journal.Browser = (*Store)(nil)

// The searches are static statements, one per kind of search; the filters
// every kind shares are NULL when unset. $1 status, $2 operation type, $3
// from, $4 to (created_at), $5 and $6 the keyset cursor (created_at, key),
// $7 the page size. The listing pages along (created_at, operation_key)
// backwards: the cursor and the time range bound that index scan.
const searchFilters = `
  AND ($1::text IS NULL OR status = $1)
  AND ($2::text IS NULL OR operation_type = $2)
  AND created_at >= coalesce($3::timestamptz, '-infinity')
  AND created_at < coalesce($4::timestamptz, 'infinity')
  AND created_at <= coalesce($5::timestamptz, 'infinity')
  AND ($5::timestamptz IS NULL OR created_at < $5 OR operation_key < $6::text)
ORDER BY created_at DESC, operation_key DESC LIMIT $7`

const (
	searchAll = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log WHERE true` + searchFilters
	searchKey = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log WHERE operation_key = $8` + searchFilters
	// searchOpen filters on an open status (started, failed_retryable,
	// unknown) through the partial index of the open operations; a final
	// status, common, is filtered along the time index (searchAll).
	searchOpen = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log
WHERE status = $8 AND status IN ('started', 'failed_retryable', 'unknown')` + searchFilters
	searchEvent  = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log WHERE event_id = $8 AND event_id <> ''` + searchFilters
	searchObject = `SELECT ` + sqljournal.RecordColumns + ` FROM agent_operation_log WHERE target_object_id = $8` + searchFilters
	// searchIntent reads each type's key range [lo, hi) bytewise, then
	// checks that a version (v and 1–9 digits) is all that follows. Each
	// range is its own index scan (LATERAL, OFFSET 0 so the planner keeps
	// it): flattened into a join, the planner would rather walk the time
	// index and test every row against the ranges.
	searchIntent = `SELECT ` + sqljournal.RecordColumns + ` FROM unnest($8::text[], $9::text[]) AS r(lo, hi)
CROSS JOIN LATERAL (SELECT * FROM agent_operation_log
    WHERE operation_key COLLATE "C" >= r.lo AND operation_key COLLATE "C" < r.hi OFFSET 0) AS l
WHERE substr(operation_key, char_length(r.lo) + 1) ~ '^[0-9]{1,9}$'` + searchFilters
)

// searches are the statements, by kind.
var searches = [sqljournal.SearchKinds]string{
	sqljournal.SearchAll: searchAll, sqljournal.SearchKey: searchKey, sqljournal.SearchOpen: searchOpen,
	sqljournal.SearchEvent: searchEvent, sqljournal.SearchObject: searchObject, sqljournal.SearchIntent: searchIntent,
}

// searchRanges are the arguments of an intent's key ranges: two arrays ($8
// lo, $9 hi).
func searchRanges(rs []journal.IntentRange) []any {
	lo, hi := make([]string, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		lo[i], hi[i] = r.Lo, r.Hi
	}
	return []any{lo, hi}
}

// ExplainSearch returns PostgreSQL's plan for q's statement (EXPLAIN, not
// run): tests check that a search reads an index.
func (s *Store) ExplainSearch(ctx context.Context, q journal.SearchQuery) (string, error) {
	return s.Reader.ExplainSearch(ctx, q, "EXPLAIN ", func(row sqljournal.Row) (line string, err error) {
		err = row.Scan(&line)
		return line, err
	})
}
