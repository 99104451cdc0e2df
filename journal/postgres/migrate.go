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

// Migrate applies every pending migration under a PostgreSQL advisory lock,
// so several replicas (or a deployment hook) may run it at once. It returns
// the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) ([]int64, error) {
	p, done, err := provider(ctx, pool, log)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", err)
	}
	return sqljournal.Versions(res), nil
}

// Migrations lists every migration with whether it is applied.
func Migrations(ctx context.Context, pool *pgxpool.Pool) ([]MigrationState, error) {
	st, err := status(ctx, pool)
	if err != nil {
		return nil, err
	}
	return sqljournal.States(st), nil
}

// pendingVersions lists the versions not applied to pool's schema.
func pendingVersions(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	st, err := status(ctx, pool)
	if err != nil {
		return nil, err
	}
	return sqljournal.Pending(st), nil
}

// status is goose's status of every migration.
func status(ctx context.Context, pool *pgxpool.Pool) ([]*goose.MigrationStatus, error) {
	p, done, err := provider(ctx, pool, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	return st, nil
}

// Pending reports whether migrations remain to be applied (for /readyz).
func Pending(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	p, done, err := provider(ctx, pool, nil)
	if err != nil {
		return false, err
	}
	defer done()
	return p.HasPending(ctx)
}

// migrateDownTo rolls migrations back, newest first, until version is the
// newest applied (0: none), under the advisory lock. It returns the versions
// it rolled back. Tests only: a journal is never migrated down in service.
func migrateDownTo(ctx context.Context, pool *pgxpool.Pool, version int64) ([]int64, error) {
	p, done, err := provider(ctx, pool, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := p.DownTo(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return sqljournal.Versions(res), nil
}
