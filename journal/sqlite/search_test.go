package sqlite_test

import (
	"context"
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
		if q.Key == "" && q.EventID == "" && q.TargetObjectID == "" && q.IntentID == "" && q.Status == "" && q.OperationType == "" {
			// A listing pages along the index: it reads one page, never
			// every row to sort them.
			require.NotContains(t, plan, "USE TEMP B-TREE FOR ORDER BY", "%s:\n%s", name, plan)
		}
	}
}
