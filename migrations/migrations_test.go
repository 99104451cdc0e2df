package migrations_test

import (
	"io/fs"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/migrations"
)

// name is a goose SQL migration: a zero-padded four-digit version, a
// snake_case name.
var name = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.sql$`)

func TestVersionsRunWithoutGaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine string
		fsys   fs.FS
	}{
		{"postgres", migrations.Postgres()},
		{"sqlite", migrations.SQLite()},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			t.Parallel()
			entries, err := fs.ReadDir(tc.fsys, ".")
			require.NoError(t, err)
			require.NotEmpty(t, entries, "no migrations embedded")
			// fs.ReadDir returns entries sorted by name; zero padding makes
			// that the version order.
			for i, e := range entries {
				m := name.FindStringSubmatch(e.Name())
				require.NotNil(t, m, "%s: not NNNN_name.sql", e.Name())
				v, err := strconv.Atoi(m[1])
				require.NoError(t, err)
				require.Equal(t, i+1, v, "%s: versions must run 1..N without gaps or repeats", e.Name())
				body, err := fs.ReadFile(tc.fsys, e.Name())
				require.NoError(t, err)
				require.Regexp(t, `(?m)^-- \+goose Up$`, string(body), "%s: no goose Up section", e.Name())
			}
		})
	}
}

// TestEnginesMigrateInStep keeps the engines' migration histories aligned: a
// schema change lands for both engines under the same version and name.
func TestEnginesMigrateInStep(t *testing.T) {
	t.Parallel()
	pg, err := fs.Glob(migrations.Postgres(), "*.sql")
	require.NoError(t, err)
	lite, err := fs.Glob(migrations.SQLite(), "*.sql")
	require.NoError(t, err)
	require.Equal(t, pg, lite)
}
