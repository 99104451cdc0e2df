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
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		if pgtest.Required() {
			t.Fatalf("PostgreSQL is required: %v", err)
		}
		t.Skipf("SKIPPING: no PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
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
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres())
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 1)
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
	require.Equal(t, []int64{2, 3, 4, 5, 6}, applied)
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
