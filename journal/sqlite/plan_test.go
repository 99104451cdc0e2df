package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchStatementsLookUpByKey keeps every batch statement driven by the
// batch: json_each outside, a primary-key lookup of the journal inside. A
// plan that walks the status index instead costs every in-flight row per
// batch item.
func TestBatchStatementsLookUpByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "journal.db"), Config{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	byKey := `SEARCH (agent_operation_log|l) USING (COVERING )?INDEX sqlite_autoindex_agent_operation_log_1 \(operation_key=\?\)`
	for name, tc := range map[string]struct {
		query, want string
		args        []any
	}{
		"selectRecords":    {query: selectRecords, want: byKey},
		"selectRecordsAt":  {query: selectRecordsAt, want: byKey},
		"claimRetry":       {query: claimRetry, want: byKey},
		"claimTakeOver":    {query: claimTakeOver, want: byKey},
		"takeOverKeys":     {query: takeOverKeys, want: byKey, args: []any{`[]`, 0, 0, ""}},
		"moveFirst":        {query: moveFirstAttempts, want: byKey},
		"clearFirst":       {query: clearFirstAttempts, want: byKey},
		"insertAttempts":   {query: insertAttempts, want: byKey},
		"complete":         {query: complete, want: byKey},
		"completeCheck":    {query: completeCheck, want: byKey},
		"heartbeat":        {query: heartbeat, want: byKey},
		"completeAttempts": {query: completeAttempts, want: `SEARCH agent_operation_attempts USING INDEX sqlite_autoindex_agent_operation_attempts_1 \(operation_key=\? AND lease_token=\?\)`},
	} {
		args := tc.args
		if args == nil {
			args = []any{`[]`, 0, 0}
		}
		all := queryPlan(t, s, tc.query, args...)
		require.Regexp(t, tc.want, all, "%s does not look keys up by primary key:\n%s", name, all)
		require.NotContains(t, all, "agent_operation_log_status_idx", "%s walks the status index:\n%s", name, all)
		require.NotContains(t, all, "SCAN agent_operation_log", "%s scans the journal:\n%s", name, all)
	}
}

// TestOpenScansReadTheOpenIndex: the scans of open operations (the
// reconciler's take-over, the unresolved and idle-retryable lists, the lease
// holders, the console's open-status search) read the partial index of the
// open operations. Migration 0006 dropped the status index of every row, and
// SQLite reads a partial index only when the query repeats its condition: a
// scan that lost it would read the whole journal.
func TestOpenScansReadTheOpenIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "journal.db"), Config{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	for name, tc := range map[string]struct {
		query string
		args  []any
	}{
		"take over stale":     {takeOverStale, []any{0, 100}},
		"list unresolved":     {listUnresolved, []any{5, 100}},
		"list idle retryable": {listIdleRetryable, []any{3_600_000, 100}},
		"lease holders":       {readSQL.LeaseHolders, nil},
		"search open":         {searchOpen, []any{nil, nil, nil, nil, nil, nil, 50, "unknown"}},
	} {
		all := queryPlan(t, s, tc.query, tc.args...)
		require.Contains(t, all, "agent_operation_log_open_created_idx", "%s does not read the open operations' index:\n%s", name, all)
		require.NotContains(t, all, "SCAN agent_operation_log", "%s scans the journal:\n%s", name, all)
	}
}

// queryPlan is SQLite's plan for query with args (EXPLAIN QUERY PLAN), one
// step a line.
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.w.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(plan, "\n")
}
