package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// searchSQL builds the statement for q: its WHERE clause from the filters
// set, the keyset condition, newest first.
func searchSQL(q journal.SearchQuery) (string, []any) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.Key != "" {
		where = append(where, "operation_key = "+arg(q.Key))
	}
	if q.EventID != "" {
		where = append(where, "event_id = "+arg(q.EventID)+" AND event_id <> ''")
	}
	if q.TargetObjectID != "" {
		where = append(where, "target_object_id = "+arg(q.TargetObjectID))
	}
	if q.IntentID != "" {
		var ors []string
		for _, r := range q.IntentRanges() {
			lo := arg(r.Lo)
			ors = append(ors, fmt.Sprintf(`(operation_key COLLATE "C" >= %s AND operation_key COLLATE "C" < %s AND substr(operation_key, %d) ~ '^[0-9]{1,9}$')`,
				lo, arg(r.Hi), utf8.RuneCountInString(r.Lo)+1))
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if q.Status != "" {
		where = append(where, "status = "+arg(string(q.Status)))
	}
	if q.OperationType != "" {
		where = append(where, "operation_type = "+arg(q.OperationType))
	}
	if !q.From.IsZero() {
		where = append(where, "created_at >= "+arg(q.From))
	}
	if !q.To.IsZero() {
		where = append(where, "created_at < "+arg(q.To))
	}
	if q.After != nil {
		where = append(where, "(created_at, operation_key) < ("+arg(q.After.CreatedAt)+", "+arg(q.After.Key)+")")
	}
	sql := `SELECT ` + browseColumns + ` FROM agent_operation_log`
	if len(where) > 0 {
		sql += "\nWHERE " + strings.Join(where, "\n  AND ")
	}
	sql += "\nORDER BY created_at DESC, operation_key DESC LIMIT " + arg(q.Limit)
	return sql, args
}

// Search implements journal.Browser.
func (s *Store) Search(ctx context.Context, q journal.SearchQuery) ([]journal.Record, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	sql, args := searchSQL(q)
	rows, err := s.db.Query(ctx, sql, args...)
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
	sql, args := searchSQL(q)
	rows, err := s.db.Query(ctx, "EXPLAIN "+sql, args...)
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
