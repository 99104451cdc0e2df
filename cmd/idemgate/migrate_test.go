package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/migrations"
)

// emptySchema creates a schema with no journal in it and returns a URL
// whose search_path points at it; it is dropped when the test ends.
func emptySchema(t *testing.T) string {
	t.Helper()
	pgtest.Schema(t) // fails (or skips outside CI) when PostgreSQL is absent
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "m_" + hex.EncodeToString(b[:])
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, pgtest.URL()); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(pgtest.URL(), "?") {
		sep = "&"
	}
	return pgtest.URL() + sep + "search_path=" + schema
}

func migrationCount(t *testing.T, fsys fs.FS) int {
	t.Helper()
	files, err := fs.Glob(fsys, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return len(files)
}

// TestMigrateUp: `migrate status --check` exits 3 on a fresh journal,
// `migrate up` applies every migration once (a second run applies none; on
// PostgreSQL several at once — replicas starting together — apply them once
// between them), and the journal then works; on PostgreSQL and SQLite.
func TestMigrateUp(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			var where []string
			var n int
			c := testDefaults()
			c.Env = "test"
			if engine == "postgres" {
				c.Journal.URL = emptySchema(t)
				where = []string{"--journal-url", c.Journal.URL}
				n = migrationCount(t, migrations.Postgres())
			} else {
				c.DataDir = t.TempDir()
				where = []string{"--data-dir", c.DataDir}
				n = migrationCount(t, migrations.SQLite())
			}
			code, out, stderr := runTool(t, append([]string{"migrate", "status", "--check"}, where...)...)
			require.Equal(t, 3, code, "pending: %s %s", out, stderr)
			require.Contains(t, stderr, "migrations pending")

			// Several at once on PostgreSQL, as replicas starting together
			// do (the SQLite journal is one replica's).
			runners := 1
			if engine == "postgres" {
				runners = 3
			}
			var wg sync.WaitGroup
			outs, errs, codes := make([]string, runners), make([]string, runners), make([]int, runners)
			for i := range runners {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i], outs[i], errs[i] = runTool(t, append([]string{"migrate", "up"}, where...)...)
				}()
			}
			wg.Wait()
			applied := 0
			for i, o := range outs {
				require.Equal(t, exitOK, codes[i], errs[i])
				var k int
				_, err := fmt.Sscanf(o, "applied %d migration(s)", &k)
				require.NoError(t, err, o)
				applied += k
			}
			require.Equal(t, n, applied, "each migration applied once: %q", outs)

			code, out, stderr = runTool(t, append([]string{"migrate", "status", "--check"}, where...)...)
			require.Equal(t, exitOK, code, stderr)
			if engine == "postgres" {
				require.Contains(t, out, "0001 applied")
				require.NotContains(t, out, "pending")
			} else {
				require.Contains(t, out, "pending=false")
			}
			code, out, stderr = runTool(t, append([]string{"migrate", "up"}, where...)...)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, "applied 0 migration(s) []\n", out)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, _, err := openJournal(ctx, c, quietLog(), readJournal)
			require.NoError(t, err)
			defer st.Close()
			_, err = st.Get(ctx, "test:payment.charge:evt-none:v1")
			require.ErrorIs(t, err, journal.ErrNotFound, "the migrated journal answers")
		})
	}
}

// TestAutoMigrateOff: with journal.auto_migrate: false, `idemgate run`
// refuses a journal that lacks migrations, saying to run `idemgate migrate
// up`, and changes nothing; on PostgreSQL and SQLite alike.
func TestAutoMigrateOff(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dataDir := t.TempDir()
			yaml := fmt.Sprintf("env: test\ndata_dir: %s\nadmin:\n  addr: ''\njournal:\n  auto_migrate: false\n", dataDir)
			where := []string{"--data-dir", dataDir}
			if engine == "postgres" {
				url := emptySchema(t)
				yaml += fmt.Sprintf("  url: %q\n", url)
				where = []string{"--journal-url", url}
			}
			code, _, stderr := runTool(t, "run", "--config", writeConfig(t, yaml))
			require.NotEqual(t, exitOK, code)
			require.Contains(t, stderr, "run `idemgate migrate up` first", "the refusal says what to do")
			code, out, stderr := runTool(t, append([]string{"migrate", "status", "--check"}, where...)...)
			require.Equal(t, 3, code, "the refused start applied nothing: %s %s", out, stderr)
		})
	}
}
