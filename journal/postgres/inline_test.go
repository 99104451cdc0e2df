package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

func inlineReq(k, owner string, ttl time.Duration) journal.ClaimRequest {
	return journal.ClaimRequest{Key: k, OperationType: "payment.charge", RequestHash: strings.Repeat("a", 64),
		TargetSystem: "payments", Owner: owner, LeaseTTL: ttl}
}

func claimOne(ctx context.Context, t *testing.T, s *postgres.Store, r journal.ClaimRequest) journal.Claim {
	t.Helper()
	cs, err := s.Claim(ctx, []journal.ClaimRequest{r})
	require.NoError(t, err)
	return cs[0]
}

// trailRows counts the rows of agent_operation_attempts for key, and reads
// whether its log row holds its first attempt (journaltest.Features).
func trailRows(t *testing.T, st journal.Store, key string) (rows int, inline bool) {
	t.Helper()
	s := st.(*postgres.Store)
	require.NoError(t, s.Pool().QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM agent_operation_attempts WHERE operation_key = $1),
		first_attempt_inline FROM agent_operation_log WHERE operation_key = $1`, key).Scan(&rows, &inline))
	return rows, inline
}

// TestDownPutsFirstAttemptsIntoTheTrail: migration 11's Down writes the
// attempts the rows hold into agent_operation_attempts (ended or open, as
// they are), and Up again leaves them there, each once.
func TestDownPutsFirstAttemptsIntoTheTrail(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t, pgtest.Schema(t))
	s := postgres.New(pool, postgres.Config{})
	keys := journaltest.BenchKeys(2)
	done := claimOne(ctx, t, s, inlineReq(keys[0], "w1", time.Minute))
	require.NoError(t, journal.CompleteOne(ctx, s, journal.Completion{Key: keys[0], Token: done.Token, Status: journal.StatusSucceeded,
		TargetObjectID: "pay_1", TargetRequestID: "rq-1"}))
	claimOne(ctx, t, s, inlineReq(keys[1], "w2", time.Minute))
	before := map[string][]journal.Attempt{}
	for _, k := range keys {
		att, err := s.Attempts(ctx, k)
		require.NoError(t, err)
		require.Len(t, att, 1)
		before[k] = att
	}

	_, err := postgres.MigrateDownTo(ctx, pool, 10)
	require.NoError(t, err)
	var outcome, reqID string
	var finished *time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT outcome, target_request_id, finished_at FROM agent_operation_attempts
		WHERE operation_key = $1 AND lease_token = 1`, keys[0]).Scan(&outcome, &reqID, &finished))
	require.Equal(t, []any{"succeeded", "rq-1", true}, []any{outcome, reqID, finished != nil})
	var open bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT finished_at IS NULL AND outcome IS NULL AND worker = 'w2'
		FROM agent_operation_attempts WHERE operation_key = $1`, keys[1]).Scan(&open))
	require.True(t, open, "the open attempt stays open")

	_, err = postgres.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	for _, k := range keys {
		att, err := s.Attempts(ctx, k)
		require.NoError(t, err)
		require.Len(t, att, 1, "each attempt once")
		require.Equal(t, before[k][0].Outcome, att[0].Outcome)
		require.Equal(t, before[k][0].Worker, att[0].Worker)
		require.Equal(t, before[k][0].TargetRequestID, att[0].TargetRequestID)
		require.WithinDuration(t, before[k][0].StartedAt, att[0].StartedAt, 0)
	}
}

// TestHotPathPlansKeepToThePrimaryKey: the claim, completion and heartbeat
// statements are planned once per connection of the hot path's pool
// (generic plans). Planned on an empty table, each still finds its rows
// through the primary key there, so the cached plan stays right as the
// table grows; the same plan made without the pool's settings reads the
// whole table, which is what the settings are for.
func TestHotPathPlansKeepToThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.Schema(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	statements := map[string]struct {
		sql  string
		args string
	}{
		"claim":     {postgres.ClaimFirstSQL, `'{k}', '{t}', '{h}', '{p}', '{e}', '{""}', '{o}', '{1000}', '{""}'`},
		"takeover":  {postgres.ClaimTakeOverSQL, `'{k}', '{h}', '{o}', '{1000}'`},
		"complete":  {postgres.CompleteSQL, `'{k}', '{1}', '{succeeded}', '{x}', '{"{}"}', '{""}', '{""}', '{""}', '{f}', '{0}'`},
		"heartbeat": {postgres.HeartbeatSQL, `'{k}', '{1}', 1000`},
	}
	plan := func(name string, settings map[string]string) string {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		for k, v := range settings {
			_, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL %s = %s", k, v))
			require.NoError(t, err)
		}
		st := statements[name]
		_, err = tx.Exec(ctx, "PREPARE hot AS "+st.sql)
		require.NoError(t, err)
		defer func() { _, _ = conn.Exec(ctx, "DEALLOCATE hot") }()
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE hot("+st.args+")")
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return strings.Join(lines, "\n")
	}
	for name := range statements {
		got := plan(name, postgres.HotPathParams)
		require.Contains(t, got, "agent_operation_log_pkey", "%s:\n%s", name, got)
		require.NotContains(t, got, "Seq Scan on agent_operation_log", "%s:\n%s", name, got)
	}
	got := plan("complete", map[string]string{"plan_cache_mode": "force_generic_plan"})
	require.Contains(t, got, "Seq Scan on agent_operation_log", "without sequential scans off, a generic plan made on an empty table reads it:\n%s", got)
}
