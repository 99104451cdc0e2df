package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
	"github.com/idemgate/idemgate/migrations"
)

// MigrationState is one migration's version, name and whether it is applied.
type MigrationState = journal.MigrationState

// migrateTries bounds how often Up runs when another process migrates the
// same file at the same moment: goose lists the applied versions before it
// takes the write lock, so the later process fails on the tables the first
// one created, and the next try finds them applied.
const migrateTries = 3

func provider(db *sql.DB, log *slog.Logger) (*goose.Provider, error) {
	var opts []goose.ProviderOption
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(), opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// migrate applies pending migrations on the writer connection. goose runs
// each SQL migration in a transaction on one connection, which the writer's
// BEGIN IMMEDIATE serialises against other processes.
func migrate(ctx context.Context, db *sql.DB, log *slog.Logger) ([]int64, error) {
	p, err := provider(db, log)
	if err != nil {
		return nil, err
	}
	var upErr error
	for range migrateTries {
		applied, err := sqljournal.Up(ctx, p)
		if err == nil {
			return applied, nil
		}
		upErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, upErr
}

// Migrate opens (creating it if needed) the journal database at path and
// applies every pending migration. It returns the versions it applied. Open
// does the same under journal.MigrateOnOpen; Migrate is the explicit
// `idemgate migrate up` step.
func Migrate(ctx context.Context, path string, log *slog.Logger) ([]int64, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite journal %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite journal folder: %w", err)
	}
	db, err := openWriter(ctx, abs, Config{}.WithDefaults())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return migrate(ctx, db, log)
}

// pendingVersions lists the versions not applied to the database of db.
func pendingVersions(ctx context.Context, db *sql.DB) ([]int64, error) {
	p, err := provider(db, nil)
	if err != nil {
		return nil, err
	}
	return sqljournal.Pending(ctx, p)
}

// withExisting runs step on a goose provider of the database at path, which
// must already exist (status queries never create a journal; a missing
// database is an error wrapping fs.ErrNotExist), on its writer, closed
// after.
func withExisting[R any](ctx context.Context, path string, step func(context.Context, *goose.Provider) (R, error)) (R, error) {
	var zero R
	abs, err := filepath.Abs(path)
	if err != nil {
		return zero, fmt.Errorf("sqlite journal %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return zero, fmt.Errorf("sqlite journal %s: no database: %w", abs, fs.ErrNotExist)
		}
		return zero, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	db, err := openWriter(ctx, abs, Config{}.WithDefaults())
	if err != nil {
		return zero, err
	}
	defer db.Close()
	p, err := provider(db, nil)
	if err != nil {
		return zero, err
	}
	return step(ctx, p)
}

// Migrations lists every migration of the database at path with whether it
// is applied. A missing database is an error wrapping fs.ErrNotExist.
func Migrations(ctx context.Context, path string) ([]MigrationState, error) {
	return withExisting(ctx, path, sqljournal.States)
}

// Pending reports whether migrations remain to be applied to the database at
// path (true for a database that does not exist yet).
func Pending(ctx context.Context, path string) (bool, error) {
	pending, err := withExisting(ctx, path, sqljournal.HasPending)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	return pending, err
}

// Pending reports whether migrations remain to be applied (for /readyz): a
// newer binary's store opened by another process may have been migrated
// past, or a file replaced under the daemon.
func (s *Store) Pending(ctx context.Context) (bool, error) {
	p, err := provider(s.w, nil)
	if err != nil {
		return false, err
	}
	return p.HasPending(ctx)
}

// migrateDownTo rolls migrations of the database at path back, newest
// first, until version is the newest applied (0: none). It returns the
// versions it rolled back. Tests only: a journal is never migrated down in
// service.
func migrateDownTo(ctx context.Context, path string, version int64) ([]int64, error) {
	return withExisting(ctx, path, func(ctx context.Context, p *goose.Provider) ([]int64, error) {
		return sqljournal.DownTo(ctx, p, version)
	})
}

// pendingAt lists the versions not applied to the database at path (every
// version when there is no database yet).
func pendingAt(ctx context.Context, path string) ([]int64, error) {
	pending, err := withExisting(ctx, path, sqljournal.Pending)
	if errors.Is(err, fs.ErrNotExist) {
		return allVersions()
	}
	return pending, err
}

// allVersions lists the versions of every migration the binary carries.
func allVersions() ([]int64, error) {
	names, err := fs.Glob(migrations.SQLite(), "*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(names))
	for _, n := range names {
		digits, _, _ := strings.Cut(n, "_")
		v, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", n, err)
		}
		out = append(out, v)
	}
	return out, nil
}
