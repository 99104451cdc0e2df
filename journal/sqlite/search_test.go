package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
)

func TestBrowser(t *testing.T) {
	t.Parallel()
	journaltest.ExerciseBrowser(t, func(t *testing.T) journal.Store { return open(t) })
}

// TestSearchPlansUseIndexes: every search the console sends reads an index,
// never the whole table (EXPLAIN QUERY PLAN: no bare SCAN of the log).
func TestSearchPlansUseIndexes(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	after := &journal.Cursor{CreatedAt: time.Now(), Key: "test:x:y:v1"}
	for name, q := range map[string]journal.SearchQuery{
		"first page": {Limit: 50},
		"next page":  {Limit: 50, After: after},
		"key":        {Limit: 50, Key: "test:x:y:v1"},
		"event":      {Limit: 50, EventID: "evt-1"},
		"object":     {Limit: 50, TargetObjectID: "obj-1"},
		"intent":     {Limit: 50, IntentID: "i-1", Env: "test", Types: []string{"a.b", "c.d"}},
		"time range": {Limit: 50, From: time.Now().Add(-time.Hour), To: time.Now(), After: after},
		"status":     {Limit: 50, Status: journal.StatusUnknown, After: after},
		"type":       {Limit: 50, OperationType: "payment.charge", After: after},
	} {
		plan, err := s.ExplainSearch(ctx, q)
		require.NoError(t, err, name)
		require.Regexp(t, `(SEARCH|SCAN) agent_operation_log USING (COVERING )?(INDEX|PRIMARY KEY)`, plan, name)
		require.NotRegexp(t, `(?m)^SCAN agent_operation_log$`, plan, name)
		if q.IntentID != "" {
			require.Regexp(t, `SEARCH agent_operation_log USING INDEX sqlite_autoindex_agent_operation_log_1 \(operation_key>\? AND operation_key<\?\)`, plan,
				"%s: each type's key range on the primary key:\n%s", name, plan)
		}
		if q.Status != "" && !q.Status.Terminal() {
			require.Contains(t, plan, "agent_operation_log_open_created_idx", "%s:\n%s", name, plan)
		}
		if q.Key == "" && q.EventID == "" && q.TargetObjectID == "" && q.IntentID == "" && q.OperationType == "" {
			// A listing pages along the index: it reads one page, never
			// every row to sort them.
			require.NotContains(t, plan, "USE TEMP B-TREE FOR ORDER BY", "%s:\n%s", name, plan)
		}
	}
}

// BenchmarkSearch measures one page of each console search on a journal of
// a million rows (the target: under 50 ms a page):
//
//	go test -run '^$' -bench BenchmarkSearch -benchtime 200x ./journal/sqlite/
func BenchmarkSearch(b *testing.B) {
	path := filepath.Join(b.TempDir(), "journal.db")
	s := openAt(b, path)
	const n = 1_000_000
	db, err := sql.Open("sqlite", path)
	require.NoError(b, err)
	defer db.Close()
	now := time.Now().UnixMilli()
	_, err = db.Exec(`
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?1),
r AS (SELECT i,
        CASE i % 3 WHEN 0 THEN 'payment.charge' WHEN 1 THEN 'crm.task.create' ELSE 'crm.deal.update' END AS t,
        CASE WHEN i % 1000 = 0 THEN 'unknown' WHEN i % 10 = 1 THEN 'failed_final' ELSE 'succeeded' END AS st,
        ?2 - (?1 - i) * 100 AS ts
      FROM g)
INSERT INTO agent_operation_log (operation_key, operation_type, request_hash, status, target_system,
    target_object_id, response_json, error_code, created_at, updated_at, completed_at, event_id)
SELECT 'test:' || t || ':intent-' || i || ':v1', t, 'h' || i, st, 'sb',
    CASE WHEN st = 'succeeded' THEN 'obj-' || i END,
    CASE WHEN st = 'succeeded' THEN '{"id":"x"}' END,
    CASE WHEN st = 'failed_final' THEN 'rejected' END,
    ts, ts, CASE WHEN st IN ('succeeded', 'failed_final') THEN ts END, 'evt-' || i
FROM r`, n, now)
	require.NoError(b, err)
	_, err = db.Exec(`ANALYZE`)
	require.NoError(b, err)
	types := []string{"payment.charge", "crm.task.create", "crm.deal.update"}
	mid := n/2 + 3 // succeeded, with an object
	deep := &journal.Cursor{CreatedAt: time.UnixMilli(now - int64(n/2)*100), Key: "test:zzz"}
	ctx := context.Background()
	for name, q := range map[string]journal.SearchQuery{
		"first page":   {Limit: 50},
		"deep page":    {Limit: 50, After: deep},
		"key":          {Limit: 50, Key: fmt.Sprintf("test:%s:intent-%d:v1", types[mid%3], mid)},
		"event":        {Limit: 50, EventID: fmt.Sprintf("evt-%d", mid)},
		"object":       {Limit: 50, TargetObjectID: fmt.Sprintf("obj-%d", mid)},
		"intent":       {Limit: 50, IntentID: fmt.Sprintf("intent-%d", mid), Env: "test", Types: types},
		"time range":   {Limit: 50, From: time.UnixMilli(now - 3600_000), To: time.UnixMilli(now - 1800_000)},
		"unknown":      {Limit: 50, Status: journal.StatusUnknown},
		"failed_final": {Limit: 50, Status: journal.StatusFailedFinal, After: deep},
		"type":         {Limit: 50, OperationType: "crm.deal.update", After: deep},
	} {
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
