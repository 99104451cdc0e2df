package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// The console's reads (journal.Browser), on the read-only pool. They are
// plain SELECTs served by the indexes of migration 0004_console; times are
// the journal's milliseconds.

var _ journal.Browser = (*Store)(nil)

// browseColumns are the row's columns as the console reads them.
const browseColumns = `operation_key, operation_type, request_hash, status, target_system,
    coalesce(target_object_id, ''), response_json, coalesce(error_code, ''), attempt_count,
    event_id, approval_id, coalesce(lease_owner, ''), lease_token, lease_until,
    reconcile_rounds, created_at, updated_at, completed_at,
    reconcile_rounds_total, raised_at, effect_possible`

func browseMS(t time.Time) int64 { return t.UnixMilli() }

func browseTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

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
	searchAll = `SELECT ` + browseColumns + ` FROM agent_operation_log WHERE true` + searchFilters
	searchKey = `SELECT ` + browseColumns + ` FROM agent_operation_log WHERE operation_key = ?8` + searchFilters
	// searchOpen filters on an open status (started, failed_retryable,
	// unknown) through the partial index of the open operations; a final
	// status, common, is filtered along the time index (searchAll).
	searchOpen = `SELECT ` + browseColumns + ` FROM agent_operation_log
WHERE status = ?8 AND status IN ('started', 'failed_retryable', 'unknown')` + searchFilters
	searchEvent  = `SELECT ` + browseColumns + ` FROM agent_operation_log WHERE event_id = ?8 AND event_id <> ''` + searchFilters
	searchObject = `SELECT ` + browseColumns + ` FROM agent_operation_log WHERE target_object_id = ?8 AND target_object_id IS NOT NULL` + searchFilters
	// searchIntent reads each type's key range [lo, hi) (?8: a JSON array
	// of [lo, hi] pairs) on the primary key, then checks that a version (v
	// and 1–9 digits) is all that follows. CROSS JOIN keeps the ranges the
	// outer loop: without statistics SQLite would rather walk the time
	// index and probe every row.
	searchIntent = `SELECT ` + browseColumns + ` FROM json_each(?8) AS r
CROSS JOIN agent_operation_log ON operation_key >= r.value ->> 0 AND operation_key < r.value ->> 1
WHERE length(substr(operation_key, length(r.value ->> 0) + 1)) BETWEEN 1 AND 9
  AND substr(operation_key, length(r.value ->> 0) + 1) NOT GLOB '*[^0-9]*'` + searchFilters
)

// searchStatement picks q's statement and its arguments.
func searchStatement(q journal.SearchQuery) (string, []any) {
	opt := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	optMS := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return browseMS(t)
	}
	args := []any{opt(string(q.Status)), opt(q.OperationType), optMS(q.From), optMS(q.To), nil, nil, q.Limit}
	if q.After != nil {
		args[4], args[5] = browseMS(q.After.CreatedAt), q.After.Key
	}
	switch {
	case q.Key != "":
		return searchKey, append(args, q.Key)
	case q.EventID != "":
		return searchEvent, append(args, q.EventID)
	case q.TargetObjectID != "":
		return searchObject, append(args, q.TargetObjectID)
	case q.IntentID != "":
		ranges := [][2]string{}
		for _, r := range q.IntentRanges() {
			ranges = append(ranges, [2]string{r.Lo, r.Hi})
		}
		b, _ := json.Marshal(ranges)
		return searchIntent, append(args, string(b))
	}
	if q.Status != "" && !q.Status.Terminal() {
		return searchOpen, append(args, string(q.Status))
	}
	return searchAll, args
}

// Search implements journal.Browser.
func (s *Store) Search(ctx context.Context, q journal.SearchQuery) ([]journal.Record, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	stmt, args := searchStatement(q)
	rows, err := s.r.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	defer rows.Close()
	var out []journal.Record
	for rows.Next() {
		r, err := scanBrowsed(rows)
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return out, nil
}

// ExplainSearch returns SQLite's query plan for q's statement (EXPLAIN
// QUERY PLAN, not run), one step a line: tests check that a search reads
// an index.
func (s *Store) ExplainSearch(ctx context.Context, q journal.SearchQuery) (string, error) {
	if err := q.Validate(); err != nil {
		return "", err
	}
	stmt, args := searchStatement(q)
	rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+stmt, args...)
	if err != nil {
		return "", fmt.Errorf("explain search: %w", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int64
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		b.WriteString(detail + "\n")
	}
	return b.String(), rows.Err()
}

func scanBrowsed(rows *sql.Rows) (journal.Record, error) {
	var (
		r                                 journal.Record
		status                            string
		result                            []byte
		leaseUntil, completedAt, raisedAt sql.NullInt64
		createdAt, updatedAt, effect      int64
	)
	err := rows.Scan(&r.Key, &r.OperationType, &r.RequestHash, &status, &r.TargetSystem,
		&r.TargetObjectID, &result, &r.ErrorCode, &r.AttemptCount,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, &leaseUntil,
		&r.ReconcileRounds, &createdAt, &updatedAt, &completedAt,
		&r.ReconcileRoundsTotal, &raisedAt, &effect)
	if err != nil {
		return r, err
	}
	r.Status = journal.Status(status)
	if len(result) > 0 {
		r.Result = result
	}
	r.CreatedAt, r.UpdatedAt = time.UnixMilli(createdAt).UTC(), time.UnixMilli(updatedAt).UTC()
	r.LeaseUntil, r.CompletedAt, r.RaisedAt = browseTime(leaseUntil), browseTime(completedAt), browseTime(raisedAt)
	r.EffectPossible = effect != 0
	return r, nil
}

// StatusCounts implements journal.Browser.
func (s *Store) StatusCounts(ctx context.Context) ([]journal.StatusCount, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, operation_type, count(*) FROM agent_operation_log
GROUP BY status, operation_type ORDER BY operation_type, status`)
	if err != nil {
		return nil, fmt.Errorf("status counts: %w", err)
	}
	defer rows.Close()
	var out []journal.StatusCount
	for rows.Next() {
		var c journal.StatusCount
		var st string
		if err := rows.Scan(&st, &c.OperationType, &c.Count); err != nil {
			return nil, fmt.Errorf("status counts: %w", err)
		}
		c.Status = journal.Status(st)
		out = append(out, c)
	}
	return out, rows.Err()
}

// AttemptCounts implements journal.Browser.
func (s *Store) AttemptCounts(ctx context.Context, since time.Time) ([]journal.AttemptCount, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT kind, outcome, count(*) FROM agent_operation_attempts
WHERE finished_at IS NOT NULL AND finished_at >= ?1 GROUP BY kind, outcome ORDER BY kind, outcome`, browseMS(since))
	if err != nil {
		return nil, fmt.Errorf("attempt counts: %w", err)
	}
	defer rows.Close()
	var out []journal.AttemptCount
	for rows.Next() {
		var c journal.AttemptCount
		var o string
		if err := rows.Scan(&c.Kind, &o, &c.Count); err != nil {
			return nil, fmt.Errorf("attempt counts: %w", err)
		}
		c.Outcome = journal.AttemptOutcome(o)
		out = append(out, c)
	}
	return out, rows.Err()
}

// LeaseHolders implements journal.Browser.
func (s *Store) LeaseHolders(ctx context.Context) ([]journal.LeaseHolder, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT lease_owner, count(*), max(lease_until) FROM agent_operation_log
WHERE status = 'started' AND lease_until >= CAST(round(unixepoch('subsec') * 1000) AS INTEGER) AND lease_owner IS NOT NULL
GROUP BY lease_owner ORDER BY lease_owner`)
	if err != nil {
		return nil, fmt.Errorf("lease holders: %w", err)
	}
	defer rows.Close()
	var out []journal.LeaseHolder
	for rows.Next() {
		var h journal.LeaseHolder
		var until sql.NullInt64
		if err := rows.Scan(&h.Owner, &h.Leases, &until); err != nil {
			return nil, fmt.Errorf("lease holders: %w", err)
		}
		h.Until = browseTime(until)
		out = append(out, h)
	}
	return out, rows.Err()
}
