package postgres_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

func TestConformance(t *testing.T) {
	journaltest.Exercise(t, func(t *testing.T) journal.Store {
		return pgtest.Store(t)
	}, journaltest.Features{ConcurrentTakeOver: true, TrailRows: trailRows})
}

func TestMigrationsUpDown(t *testing.T) {
	journaltest.ExerciseMigrations(t, func(t *testing.T) journaltest.Migrator {
		dsn := pgtest.EmptySchema(t)
		pool := pgtest.Pool(t, dsn)
		return journaltest.Migrator{
			Open: func(ctx context.Context, p journal.MigrationPolicy) (journal.Store, error) {
				s, err := postgres.Open(ctx, dsn, postgres.Config{Migrations: p})
				if err != nil {
					return nil, err
				}
				return s, nil
			},
			Pending: func(ctx context.Context) ([]int64, error) { return postgres.PendingVersions(ctx, pool) },
			Up:      func(ctx context.Context) ([]int64, error) { return postgres.Migrate(ctx, pool, nil) },
			DownTo: func(ctx context.Context, v int64) ([]int64, error) {
				return postgres.MigrateDownTo(ctx, pool, v)
			},
		}
	})
}
