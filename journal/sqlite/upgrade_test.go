package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/migrations"
)

// TestUpgradeClosesAbandonedAttempts: a journal written by version 1 holds
// an attempt its worker never closed under a token that was taken over since
// (the worker was killed), and an unknown operation with lookup rounds.
// Migration 2 closes the superseded attempt as abandoned, leaves the current
// one open, keeps the rounds as history and marks the effect as possible.
func TestUpgradeClosesAbandonedAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite())
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 1)
	require.NoError(t, err)
	const key = "test:payment.charge:upgrade:v1"
	_, err = db.ExecContext(ctx, `INSERT INTO agent_operation_log
		(operation_key, operation_type, request_hash, status, target_system, lease_owner, lease_token, reconcile_rounds)
		VALUES (?1, 'payment.charge', 'h', 'unknown', 'payments', 'rec', 3, 2)`, key)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO agent_operation_attempts
		(operation_key, attempt, lease_token, worker, kind, finished_at, outcome) VALUES
		(?1, 1, 1, 'killed', 'execute', NULL, NULL),
		(?1, 1, 2, 'rec', 'reconcile', 1700000000000, 'unknown'),
		(?1, 1, 3, 'rec', 'reconcile', NULL, NULL)`, key)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	applied, err := sqlite.Migrate(ctx, path, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, applied)
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	atts, err := s.Attempts(ctx, key)
	require.NoError(t, err)
	require.Len(t, atts, 3)
	require.Equal(t, journal.OutcomeAbandoned, atts[0].Outcome)
	require.False(t, atts[0].FinishedAt.IsZero())
	require.Equal(t, journal.OutcomeUnknown, atts[1].Outcome)
	require.Empty(t, atts[2].Outcome, "the current lease's attempt stays open")
	rec, err := s.Get(ctx, key)
	require.NoError(t, err)
	require.True(t, rec.EffectPossible)
	require.Equal(t, 2, rec.ReconcileRoundsTotal)
	// The closed set is enforced.
	_, err = s.Complete(ctx, []journal.Completion{{Key: key, Token: 3, Status: journal.StatusSucceeded, TargetObjectID: "pay_1"}})
	require.NoError(t, err)
	w, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer w.Close()
	_, err = w.ExecContext(ctx, `UPDATE agent_operation_attempts SET outcome = 'lost' WHERE operation_key = ?1`, key)
	require.ErrorContains(t, err, "CHECK")
	// And Down restores version 1.
	s.Close()
	down, err := goose.NewProvider(goose.DialectSQLite3, w, migrations.SQLite())
	require.NoError(t, err)
	_, err = down.DownTo(ctx, 1)
	require.NoError(t, err)
}

// TestEachDownRestoresTheSchema: every migration's Down leaves the schema as
// its Up found it: each table's columns (PRAGMA table_xinfo: name, type,
// nullability, default, key) and each index's columns, uniqueness and
// condition (its CREATE statement as SQLite keeps it).
func TestEachDownRestoresTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "journal.db")+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite())
	require.NoError(t, err)
	journaltest.ExerciseEachDown(t, p, func(t *testing.T) []string { return liteSchema(ctx, t, db) })
}

// liteSchema describes db's tables and indexes (goose's own left out), one
// line each, sorted.
func liteSchema(ctx context.Context, t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, `
SELECT 'column ' || m.name || '.' || c.name || ' ' || c.type || ' notnull=' || c."notnull"
       || ' default=' || coalesce(c.dflt_value, '-') || ' pk=' || c.pk
FROM sqlite_master m, pragma_table_xinfo(m.name) c
WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'goose_db_version'
UNION ALL
SELECT 'index ' || m.name || ' on ' || m.tbl_name || ': ' || coalesce(m.sql, '(automatic)')
FROM sqlite_master m
WHERE m.type = 'index' AND m.tbl_name <> 'goose_db_version'
ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		require.NoError(t, rows.Scan(&l))
		lines = append(lines, l)
	}
	require.NoError(t, rows.Err())
	return lines
}

// TestDownPutsFirstAttemptsIntoTheTrail: migration 11's Down writes the
// attempts the rows hold into agent_operation_attempts (ended or open, as
// they are), and Up again leaves them there, each once.
func TestDownPutsFirstAttemptsIntoTheTrail(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	require.NoError(t, err)
	keys := journaltest.BenchKeys(2)
	req := func(k, owner string) []journal.ClaimRequest {
		return []journal.ClaimRequest{{Key: k, OperationType: "payment.charge", RequestHash: strings.Repeat("a", 64),
			TargetSystem: "payments", Owner: owner, LeaseTTL: time.Minute}}
	}
	done, err := s.Claim(ctx, req(keys[0], "w1"))
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(ctx, s, journal.Completion{Key: keys[0], Token: done[0].Token,
		Status: journal.StatusSucceeded, TargetObjectID: "pay_1", TargetRequestID: "rq-1"}))
	_, err = s.Claim(ctx, req(keys[1], "w2"))
	require.NoError(t, err)
	before := map[string]journal.Attempt{}
	for _, k := range keys {
		att, err := s.Attempts(ctx, k)
		require.NoError(t, err)
		require.Len(t, att, 1)
		before[k] = att[0]
	}
	s.Close()

	_, err = sqlite.MigrateDownTo(ctx, path, 10)
	require.NoError(t, err)
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	var outcome, reqID string
	var finished sql.NullInt64
	require.NoError(t, db.QueryRowContext(ctx, `SELECT outcome, target_request_id, finished_at FROM agent_operation_attempts
		WHERE operation_key = ?1 AND lease_token = 1`, keys[0]).Scan(&outcome, &reqID, &finished))
	require.Equal(t, []any{"succeeded", "rq-1", true}, []any{outcome, reqID, finished.Valid})
	var open bool
	require.NoError(t, db.QueryRowContext(ctx, `SELECT finished_at IS NULL AND outcome IS NULL AND worker = 'w2'
		FROM agent_operation_attempts WHERE operation_key = ?1`, keys[1]).Scan(&open))
	require.True(t, open, "the open attempt stays open")
	require.NoError(t, db.Close())

	s, err = sqlite.Open(ctx, path, sqlite.Config{})
	require.NoError(t, err)
	defer s.Close()
	for _, k := range keys {
		att, err := s.Attempts(ctx, k)
		require.NoError(t, err)
		require.Len(t, att, 1, "each attempt once")
		require.Equal(t, before[k].Outcome, att[0].Outcome)
		require.Equal(t, before[k].Worker, att[0].Worker)
		require.Equal(t, before[k].TargetRequestID, att[0].TargetRequestID)
		require.True(t, before[k].StartedAt.Equal(att[0].StartedAt))
	}
}
