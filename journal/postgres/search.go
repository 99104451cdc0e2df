package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/journal"
)

// The console's reads (journal.Browser). They are plain SELECTs served by
// the indexes of migration 0004_console.

var _ journal.Browser = (*Store)(nil)

// browseColumns are the row's columns as the console reads them.
const browseColumns = `operation_key, operation_type, request_hash, status, target_system,
    coalesce(target_object_id, ''), response_json, coalesce(error_code, ''), attempt_count,
    event_id, approval_id, coalesce(lease_owner, ''), lease_token, lease_until,
    reconcile_rounds, created_at, updated_at, completed_at,
    reconcile_rounds_total, raised_at, effect_possible`

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
	searchAll = `SELECT ` + browseColumns + ` FROM agent_operation_log WHERE true` + searchFilters
	searchKey = `SELECT ` + browseColumns + ` FROM agent_operation_log WHERE operation_key = $8` + searchFilters
	// searchOpen filters on an open status (started, failed_retryable,
	// unknown) through the partial index of the open operations; a final
	// status, common, is filtered along the time index (searchAll).
	searchOpen = `SELECT ` + browseColumns + ` FROM agent_operation_log
WHERE status = $8 AND status IN ('started', 'failed_retryable', 'unknown')` + searchFilters
	searchEvent  = `SELECT ` + browseColumns + ` FROM agent_operation_log WHERE event_id = $8 AND event_id <> ''` + searchFilters
	searchObject = `SELECT ` + browseColumns + ` FROM agent_operation_log WHERE target_object_id = $8` + searchFilters
	// searchIntent reads each type's key range [lo, hi) bytewise, then
	// checks that a version (v and 1–9 digits) is all that follows. Each
	// range is its own index scan (LATERAL, OFFSET 0 so the planner keeps
	// it): flattened into a join, the planner would rather walk the time
	// index and test every row against the ranges.
	searchIntent = `SELECT ` + browseColumns + ` FROM unnest($8::text[], $9::text[]) AS r(lo, hi)
CROSS JOIN LATERAL (SELECT * FROM agent_operation_log
    WHERE operation_key COLLATE "C" >= r.lo AND operation_key COLLATE "C" < r.hi OFFSET 0) AS l
WHERE substr(operation_key, char_length(r.lo) + 1) ~ '^[0-9]{1,9}$'` + searchFilters
)

// searchStatement picks q's statement and its arguments.
func searchStatement(q journal.SearchQuery) (string, []any) {
	opt := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	optTime := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t
	}
	args := []any{opt(string(q.Status)), opt(q.OperationType), optTime(q.From), optTime(q.To), nil, nil, q.Limit}
	if q.After != nil {
		args[4], args[5] = q.After.CreatedAt, q.After.Key
	}
	switch {
	case q.Key != "":
		return searchKey, append(args, q.Key)
	case q.EventID != "":
		return searchEvent, append(args, q.EventID)
	case q.TargetObjectID != "":
		return searchObject, append(args, q.TargetObjectID)
	case q.IntentID != "":
		var lo, hi []string
		for _, r := range q.IntentRanges() {
			lo, hi = append(lo, r.Lo), append(hi, r.Hi)
		}
		return searchIntent, append(args, lo, hi)
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
	rows, err := s.db.Query(ctx, stmt, args...)
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

// ExplainSearch returns PostgreSQL's plan for q's statement (EXPLAIN, not
// run): tests check that a search reads an index.
func (s *Store) ExplainSearch(ctx context.Context, q journal.SearchQuery) (string, error) {
	if err := q.Validate(); err != nil {
		return "", err
	}
	stmt, args := searchStatement(q)
	rows, err := s.db.Query(ctx, "EXPLAIN "+stmt, args...)
	if err != nil {
		return "", fmt.Errorf("explain search: %w", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		b.WriteString(line + "\n")
	}
	return b.String(), rows.Err()
}

func scanBrowsed(row pgx.Row) (journal.Record, error) {
	var (
		r                                 journal.Record
		status                            string
		result                            []byte
		leaseUntil, completedAt, raisedAt *time.Time
	)
	err := row.Scan(&r.Key, &r.OperationType, &r.RequestHash, &status, &r.TargetSystem,
		&r.TargetObjectID, &result, &r.ErrorCode, &r.AttemptCount,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, &leaseUntil,
		&r.ReconcileRounds, &r.CreatedAt, &r.UpdatedAt, &completedAt,
		&r.ReconcileRoundsTotal, &raisedAt, &r.EffectPossible)
	if err != nil {
		return r, err
	}
	r.Status = journal.Status(status)
	if len(result) > 0 {
		r.Result = result
	}
	for _, p := range []struct {
		dst *time.Time
		src *time.Time
	}{{&r.LeaseUntil, leaseUntil}, {&r.CompletedAt, completedAt}, {&r.RaisedAt, raisedAt}} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	return r, nil
}

// StatusCounts implements journal.Browser.
func (s *Store) StatusCounts(ctx context.Context) ([]journal.StatusCount, error) {
	rows, err := s.db.Query(ctx, `SELECT status, operation_type, count(*) FROM agent_operation_log
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
	rows, err := s.db.Query(ctx, `SELECT kind, outcome, count(*) FROM agent_operation_attempts
WHERE finished_at IS NOT NULL AND finished_at >= $1 GROUP BY kind, outcome ORDER BY kind, outcome`, since)
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
	rows, err := s.db.Query(ctx, `SELECT lease_owner, count(*), max(lease_until) FROM agent_operation_log
WHERE status = 'started' AND lease_until >= now() AND lease_owner IS NOT NULL
GROUP BY lease_owner ORDER BY lease_owner`)
	if err != nil {
		return nil, fmt.Errorf("lease holders: %w", err)
	}
	defer rows.Close()
	var out []journal.LeaseHolder
	for rows.Next() {
		var h journal.LeaseHolder
		if err := rows.Scan(&h.Owner, &h.Leases, &h.Until); err != nil {
			return nil, fmt.Errorf("lease holders: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
