package journaltest

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// Migrator controls the migrations of one database that has no journal yet
// (an empty schema, a file not created yet).
type Migrator struct {
	// Open opens a store on the database under a migration policy.
	Open func(ctx context.Context, p journal.MigrationPolicy) (journal.Store, error)
	// Pending lists the versions not applied, ascending.
	Pending func(ctx context.Context) ([]int64, error)
	// Up applies every pending migration and lists what it applied.
	Up func(ctx context.Context) ([]int64, error)
	// DownTo rolls back, newest first, until version is the newest applied
	// (0: none), and lists what it rolled back.
	DownTo func(ctx context.Context, version int64) ([]int64, error)
}

// NewMigrator returns a Migrator on a fresh database with no journal.
type NewMigrator func(t *testing.T) Migrator

// ExerciseMigrations runs the migrations up, down to nothing and up again,
// and checks both policies of opening: a journal that lacks migrations is
// refused under RequireMigrated, with an error naming `idemgate migrate up`,
// and migrated under MigrateOnOpen.
func ExerciseMigrations(t *testing.T, newMigrator NewMigrator) {
	migrating(t, newMigrator, "UpDownUp", func(t *testing.T, m Migrator, c context.Context) {
		all, err := m.Pending(c)
		require.NoError(t, err)
		require.NotEmpty(t, all, "a fresh database lacks every migration")
		require.True(t, slices.IsSorted(all), "%v", all)
		requireRefused(t, m)

		applied, err := m.Up(c)
		require.NoError(t, err)
		require.Equal(t, all, applied, "up applies every migration once, in order")
		requireWorks(t, m)
		again, err := m.Up(c)
		require.NoError(t, err)
		require.Empty(t, again, "a second up applies nothing")

		down, err := m.DownTo(c, 0)
		require.NoError(t, err)
		reversed := slices.Clone(all)
		slices.Reverse(reversed)
		require.Equal(t, reversed, down, "down rolls every migration back, newest first")
		pending, err := m.Pending(c)
		require.NoError(t, err)
		require.Equal(t, all, pending)
		requireRefused(t, m)

		applied, err = m.Up(c)
		require.NoError(t, err)
		require.Equal(t, all, applied, "up again applies every migration")
		requireWorks(t, m)
	})

	migrating(t, newMigrator, "PartlyMigratedIsRefused", func(t *testing.T, m Migrator, c context.Context) {
		all, err := m.Up(c)
		require.NoError(t, err)
		down, err := m.DownTo(c, all[0])
		require.NoError(t, err)
		require.Len(t, down, len(all)-1)
		err = requireRefused(t, m)
		if len(all) > 1 {
			require.ErrorContains(t, err, "not applied")
		}
		s, err := m.Open(c, journal.MigrateOnOpen)
		require.NoError(t, err, "applied at open")
		s.Close()
		pending, err := m.Pending(c)
		require.NoError(t, err)
		require.Empty(t, pending)
	})

	migrating(t, newMigrator, "MigrateOnOpen", func(t *testing.T, m Migrator, c context.Context) {
		s, err := m.Open(c, journal.MigrateOnOpen)
		require.NoError(t, err)
		s.Close()
		requireWorks(t, m)
	})
}

// migrating runs fn as the parallel case name on a fresh database from
// newMigrator, with the case's context.
func migrating(t *testing.T, newMigrator NewMigrator, name string, fn func(t *testing.T, m Migrator, c context.Context)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		fn(t, newMigrator(t), ctx(t))
	})
}

// requireRefused checks that the database cannot be opened without
// migrating, and why.
func requireRefused(t *testing.T, m Migrator) error {
	t.Helper()
	s, err := m.Open(ctx(t), journal.RequireMigrated)
	if err == nil {
		s.Close()
	}
	require.ErrorIs(t, err, journal.ErrNotMigrated)
	require.ErrorContains(t, err, "idemgate migrate up")
	return err
}

// requireWorks opens the migrated journal without migrating and runs one
// operation through it.
func requireWorks(t *testing.T, m Migrator) {
	t.Helper()
	s, err := m.Open(ctx(t), journal.RequireMigrated)
	require.NoError(t, err)
	defer s.Close()
	k, c := claimed(t, s, 30*time.Second)
	require.Equal(t, journal.Execute, c.Decision)
	complete(t, s, completion(k, c.Token, journal.StatusSucceeded))
	require.Equal(t, journal.ReplaySucceeded, claim(t, s, req(k, hashA, other, 30*time.Second)).Decision)
}

// ExerciseEachDown runs every migration of p (on a database with none
// applied) up and straight back down, in version order, and checks with
// schema, the engine's description of its tables, columns, indexes and
// constraints, that each Down restores what its Up found; then it applies
// the migration again and goes on to the next.
func ExerciseEachDown(t *testing.T, p *goose.Provider, schema func(t *testing.T) []string) {
	t.Helper()
	ctx := context.Background()
	sources := p.ListSources()
	require.NotEmpty(t, sources)
	for _, src := range sources {
		before := schema(t)
		_, err := p.UpTo(ctx, src.Version)
		require.NoError(t, err, "up to %d", src.Version)
		_, err = p.DownTo(ctx, src.Version-1)
		require.NoError(t, err, "down from %d", src.Version)
		require.Equal(t, before, schema(t), "down from %d (%s) does not restore the schema", src.Version, filepath.Base(src.Path))
		_, err = p.UpTo(ctx, src.Version)
		require.NoError(t, err, "up to %d again", src.Version)
	}
}
