package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

func TestBrowser(t *testing.T) {
	t.Parallel()
	journaltest.ExerciseBrowser(t, func(t *testing.T) journal.Store { return pgtest.Store(t) })
}

// fillSearchable inserts n operations of three types created 100 ms apart
// up to now (one unknown in a thousand, one failed_final in ten, the rest
// succeeded with an object), intents intent-1..intent-n, events evt-1..,
// objects obj-<i>, and analyses the table.
func fillSearchable(tb testing.TB, s *postgres.Store, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := s.Pool().Exec(ctx, `
INSERT INTO agent_operation_log (operation_key, operation_type, request_hash, status, target_system,
    target_object_id, response_json, error_code, created_at, updated_at, completed_at, event_id)
SELECT 'test:' || t || ':intent-' || i || ':v1', t, md5(i::text), st, 'sb',
    CASE WHEN st = 'succeeded' THEN 'obj-' || i END,
    CASE WHEN st = 'succeeded' THEN '{"id":"x"}'::jsonb END,
    CASE WHEN st = 'failed_final' THEN 'rejected' END,
    ts, ts, CASE WHEN st IN ('succeeded', 'failed_final') THEN ts END, 'evt-' || i
FROM (SELECT i, (ARRAY['payment.charge', 'crm.task.create', 'crm.deal.update'])[1 + i % 3] AS t,
             CASE WHEN i % 1000 = 0 THEN 'unknown' WHEN i % 10 = 1 THEN 'failed_final' ELSE 'succeeded' END AS st,
             now() - ($1::int - i) * interval '100 milliseconds' AS ts
      FROM generate_series(1, $1::int) AS i) AS g`, n)
	if err != nil {
		tb.Fatalf("fill: %v", err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE agent_operation_log`); err != nil {
		tb.Fatalf("analyze: %v", err)
	}
}

// searchCases are the console's searches: its listing's first and a deep
// page, and each filter it offers.
func searchCases(n int) map[string]journal.SearchQuery {
	types := []string{"payment.charge", "crm.task.create", "crm.deal.update"}
	deep := &journal.Cursor{CreatedAt: time.Now().Add(-time.Duration(n/2) * 100 * time.Millisecond), Key: "test:zzz"}
	mid := n/2 + 3 // succeeded, with an object
	return map[string]journal.SearchQuery{
		"first page":   {Limit: 50},
		"deep page":    {Limit: 50, After: deep},
		"key":          {Limit: 50, Key: fmt.Sprintf("test:%s:intent-%d:v1", types[mid%3], mid)},
		"event":        {Limit: 50, EventID: fmt.Sprintf("evt-%d", mid)},
		"object":       {Limit: 50, TargetObjectID: fmt.Sprintf("obj-%d", mid)},
		"intent":       {Limit: 50, IntentID: fmt.Sprintf("intent-%d", mid), Env: "test", Types: types},
		"time range":   {Limit: 50, From: time.Now().Add(-time.Hour), To: time.Now().Add(-30 * time.Minute)},
		"unknown":      {Limit: 50, Status: journal.StatusUnknown},
		"failed_final": {Limit: 50, Status: journal.StatusFailedFinal, After: deep},
		"type":         {Limit: 50, OperationType: "crm.deal.update", After: deep},
	}
}

// TestSearchPlansUseIndexes: on a journal of 100,000 rows (analysed), no
// search the console sends reads the whole table: PostgreSQL's plan (EXPLAIN,
// not timed) reads an index for each. The figures per page on a million rows
// are BenchmarkSearch's.
func TestSearchPlansUseIndexes(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	const n = 100_000
	fillSearchable(t, s, n)
	ctx := context.Background()
	want := map[string]string{
		"first page": "agent_operation_log_created_key_idx", "deep page": "agent_operation_log_created_key_idx",
		"time range": "agent_operation_log_created_key_idx", "type": "agent_operation_log_created_key_idx",
		"key": "agent_operation_log_pkey", "event": "agent_operation_log_event_idx",
		"object": "agent_operation_log_object_idx", "intent": "agent_operation_log_pkey",
		"unknown": "agent_operation_log_open_created_idx", "failed_final": "agent_operation_log_created_key_idx",
	}
	for name, q := range searchCases(n) {
		plan, err := s.ExplainSearch(ctx, q)
		require.NoError(t, err, name)
		require.Contains(t, plan, "Index", "%s:\n%s", name, plan)
		require.Regexp(t, want[name], plan, "%s:\n%s", name, plan)
		require.NotContains(t, plan, "Seq Scan on agent_operation_log", "%s:\n%s", name, plan)
		recs, err := s.Search(ctx, q)
		require.NoError(t, err, name)
		require.NotEmpty(t, recs, name)
	}
}

// TestOpenScansReadTheOpenIndex: on a journal of 100,000 rows, nearly all
// ended, the reconciler's scans (unknown outcomes and expired leases, the
// unresolved, the idle retryable) and the count of lease holders read the
// partial index of the open operations: migration 0006 dropped the status
// index of every row, and none of them may fall back to reading the table.
func TestOpenScansReadTheOpenIndex(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	fillSearchable(t, s, 100_000)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		sql  string
		args []any
	}{
		"take over stale":     {postgres.TakeOverStaleSQL, []any{"reconciler", int64(30_000), 100}},
		"list unresolved":     {postgres.ListUnresolvedSQL, []any{5, 100}},
		"list idle retryable": {postgres.ListIdleRetryableSQL, []any{int64(3_600_000), 100}},
		"lease holders":       {postgres.LeaseHoldersSQL, nil},
	} {
		rows, err := s.Pool().Query(ctx, "EXPLAIN "+tc.sql, tc.args...)
		require.NoError(t, err, name)
		var lines []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line), name)
			lines = append(lines, line)
		}
		require.NoError(t, rows.Err(), name)
		plan := strings.Join(lines, "\n")
		require.Contains(t, plan, "agent_operation_log_open_created_idx", "%s:\n%s", name, plan)
		require.NotContains(t, plan, "Seq Scan on agent_operation_log", "%s:\n%s", name, plan)
	}
}

// BenchmarkSearch measures one page of each console search on a journal of
// a million rows (the target: under 50 ms a page):
//
//	go test -run '^$' -bench BenchmarkSearch -benchtime 200x ./journal/postgres/
func BenchmarkSearch(b *testing.B) {
	s := pgtest.Store(b)
	const n = 1_000_000
	fillSearchable(b, s, n)
	ctx := context.Background()
	for name, q := range searchCases(n) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				recs, err := s.Search(ctx, q)
				if err != nil || len(recs) == 0 {
					b.Fatalf("%s: %d rows, %v", name, len(recs), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}
