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
