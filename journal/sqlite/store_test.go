package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/sqlite"
)

// open returns a store on a fresh database file in t's temporary folder.
func open(t testing.TB) *sqlite.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "data", "journal.db"))
}

func openAt(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	journaltest.Exercise(t, func(t *testing.T) journal.Store {
		return open(t)
	}, journaltest.Features{ConcurrentTakeOver: false})
}

func TestMigrationsUpDown(t *testing.T) {
	t.Parallel()
	journaltest.ExerciseMigrations(t, func(t *testing.T) journaltest.Migrator {
		path := filepath.Join(t.TempDir(), "data", "journal.db")
		return journaltest.Migrator{
			Open: func(ctx context.Context, p journal.MigrationPolicy) (journal.Store, error) {
				s, err := sqlite.Open(ctx, path, sqlite.Config{Migrations: p})
				if err != nil {
					return nil, err
				}
				return s, nil
			},
			Pending: func(ctx context.Context) ([]int64, error) { return sqlite.PendingAt(ctx, path) },
			Up:      func(ctx context.Context) ([]int64, error) { return sqlite.Migrate(ctx, path, nil) },
			DownTo: func(ctx context.Context, v int64) ([]int64, error) {
				return sqlite.MigrateDownTo(ctx, path, v)
			},
		}
	})
}
