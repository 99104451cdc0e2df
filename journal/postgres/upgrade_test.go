package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/migrations"
)

// TestUpgradeClosesAbandonedAttempts: a journal written by version 1 holds
// an attempt its worker never closed under a token that was taken over since
// (the worker was killed), and an unknown operation with lookup rounds.
// Migration 2 closes the superseded attempt as abandoned, leaves the current
// one open, keeps the rounds as history and marks the effect as possible.
func TestUpgradeClosesAbandonedAttempts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, p := emptySchema(ctx, t)
	_, err := p.UpTo(ctx, 1)
	require.NoError(t, err)

	const key = "test:payment.charge:upgrade:v1"
	_, err = pool.Exec(ctx, `INSERT INTO agent_operation_log
		(operation_key, operation_type, request_hash, status, target_system, lease_owner, lease_token, reconcile_rounds)
		VALUES ($1, 'payment.charge', 'h', 'unknown', 'payments', 'rec', 3, 2)`, key)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO agent_operation_attempts
		(operation_key, attempt, lease_token, worker, kind, finished_at, outcome) VALUES
		($1, 1, 1, 'killed', 'execute', NULL, NULL),
		($1, 1, 2, 'rec', 'reconcile', now(), 'unknown'),
		($1, 1, 3, 'rec', 'reconcile', NULL, NULL)`, key)
	require.NoError(t, err)

	applied, err := postgres.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, applied)
	s := postgres.New(pool, postgres.Config{})
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
	_, err = pool.Exec(ctx, `UPDATE agent_operation_attempts SET outcome = 'lost' WHERE operation_key = $1`, key)
	require.ErrorContains(t, err, "agent_operation_attempts_outcome_check")
	// And Down restores version 1.
	_, err = p.DownTo(ctx, 1)
	require.NoError(t, err)
}

// emptySchema makes a private, empty schema and returns a pool whose
// search_path is it, and goose's provider of the PostgreSQL migrations on it.
func emptySchema(ctx context.Context, t *testing.T) (*pgxpool.Pool, *goose.Provider) {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		if pgtest.Required() {
			t.Fatalf("PostgreSQL is required: %v", err)
		}
		t.Skipf("SKIPPING: no PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres())
	require.NoError(t, err)
	return pool, p
}

// TestEachDownRestoresTheSchema: every migration's Down leaves the schema as
// its Up found it: the columns (type, collation, nullability, default), the
// indexes as PostgreSQL prints them (partial conditions and collations
// included) and the constraints. An index made in the wrong order loses a
// COLLATE "C" of its own, and the searches that need it read the table.
func TestEachDownRestoresTheSchema(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, p := emptySchema(ctx, t)
	journaltest.ExerciseEachDown(t, p, func(t *testing.T) []string { return schemaOf(ctx, t, pool) })
}

// schemaOf describes the tables of the pool's search_path schema, one line
// per column, index and constraint, sorted.
func schemaOf(ctx context.Context, t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || ' collate ' || coalesce(co.collname, '-') || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || ' default ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid AND c.relkind = 'r'
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relname <> 'goose_db_version'
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename <> 'goose_db_version'
UNION ALL
SELECT 'constraint ' || r.relname || '.' || con.conname || ' ' || pg_get_constraintdef(con.oid)
FROM pg_constraint con
JOIN pg_class r ON r.oid = con.conrelid
JOIN pg_namespace n ON n.oid = r.relnamespace AND n.nspname = current_schema()
WHERE r.relname <> 'goose_db_version'
ORDER BY 1`)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return lines
}

// TestLeanIndexesMigrationGivesUpOnALongTransaction: migration 0006 needs
// both tables to itself; behind a transaction that keeps reading the log it
// gives up after its lock timeout (10 s) instead of queueing every later
// query of the journal behind its lock request, and applies once that
// transaction has ended.
func TestLeanIndexesMigrationGivesUpOnALongTransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, p := emptySchema(ctx, t)
	_, err := p.UpTo(ctx, 5)
	require.NoError(t, err)
	long, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = long.Exec(ctx, `SELECT count(*) FROM agent_operation_log`)
	require.NoError(t, err)

	_, err = p.UpTo(ctx, 6)
	require.ErrorContains(t, err, "lock timeout")
	v, err := p.GetDBVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), v, "nothing of 0006 applied")

	require.NoError(t, long.Rollback(ctx))
	_, err = p.UpTo(ctx, 6)
	require.NoError(t, err)
}
