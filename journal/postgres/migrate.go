package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
	"github.com/idemgate/idemgate/migrations"
)

// MigrationState is one migration's version, name and whether it is applied.
type MigrationState = journal.MigrationState

func provider(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (*goose.Provider, func(), error) {
	// The advisory lock is per schema, so journals in different schemas of one
	// database migrate independently.
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, nil, fmt.Errorf("migrations: current schema: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("idemgate migrations " + schema))
	db := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64()>>1)),
		lock.WithLockTimeout(1, 600), // poll every second, up to ten minutes
	)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), opts...)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, func() { p.Close() }, nil
}

// withProvider runs step on a goose provider of pool's schema (with log),
// closed after.
func withProvider[R any](ctx context.Context, pool *pgxpool.Pool, log *slog.Logger,
	step func(context.Context, *goose.Provider) (R, error)) (R, error) {
	p, done, err := provider(ctx, pool, log)
	if err != nil {
		var zero R
		return zero, err
	}
	defer done()
	return step(ctx, p)
}

// Migrate applies every pending migration under a PostgreSQL advisory lock,
// so several replicas (or a deployment hook) may run it at once. It returns
// the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) ([]int64, error) {
	return withProvider(ctx, pool, log, sqljournal.Up)
}

// Migrations lists every migration with whether it is applied.
func Migrations(ctx context.Context, pool *pgxpool.Pool) ([]MigrationState, error) {
	return withProvider(ctx, pool, nil, sqljournal.States)
}

// pendingVersions lists the versions not applied to pool's schema.
func pendingVersions(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	return withProvider(ctx, pool, nil, sqljournal.Pending)
}

// Pending reports whether migrations remain to be applied (for /readyz).
func Pending(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	return withProvider(ctx, pool, nil, sqljournal.HasPending)
}

// migrateDownTo rolls migrations back, newest first, until version is the
// newest applied (0: none), under the advisory lock. It returns the versions
// it rolled back. Tests only: a journal is never migrated down in service.
func migrateDownTo(ctx context.Context, pool *pgxpool.Pool, version int64) ([]int64, error) {
	return withProvider(ctx, pool, nil, func(ctx context.Context, p *goose.Provider) ([]int64, error) {
		return sqljournal.DownTo(ctx, p, version)
	})
}
