package sqlite_test

import (
	"context"
	"database/sql"
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
	}, journaltest.Features{ConcurrentTakeOver: false, TrailRows: trailRows})
}

// trailRows counts the rows of agent_operation_attempts for key, and reads
// whether its log row holds its first attempt (journaltest.Features),
// through a connection of the test's own to the store's file.
func trailRows(t *testing.T, st journal.Store, key string) (rows int, inline bool) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+st.(*sqlite.Store).Path())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.QueryRow(`SELECT
		(SELECT count(*) FROM agent_operation_attempts WHERE operation_key = ?1),
		first_attempt_inline FROM agent_operation_log WHERE operation_key = ?1`, key).Scan(&rows, &inline))
	return rows, inline
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
