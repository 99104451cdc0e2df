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
		res, err := p.Up(ctx)
		if err == nil {
			return sqljournal.Versions(res), nil
		}
		upErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("migrate up: %w", upErr)
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
	return pending(ctx, p)
}

// status is goose's status of every migration.
func status(ctx context.Context, p *goose.Provider) ([]*goose.MigrationStatus, error) {
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	return st, nil
}

// pending lists the versions p's database lacks.
func pending(ctx context.Context, p *goose.Provider) ([]int64, error) {
	st, err := status(ctx, p)
	if err != nil {
		return nil, err
	}
	return sqljournal.Pending(st), nil
}

// existing opens the writer of a database that must already exist, and a
// goose provider on it: status queries never create a journal. A missing
// database is an error wrapping fs.ErrNotExist. done closes the writer.
func existing(ctx context.Context, path string) (p *goose.Provider, done func(), err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite journal %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("sqlite journal %s: no database: %w", abs, fs.ErrNotExist)
		}
		return nil, nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	db, err := openWriter(ctx, abs, Config{}.WithDefaults())
	if err != nil {
		return nil, nil, err
	}
	if p, err = provider(db, nil); err != nil {
		db.Close()
		return nil, nil, err
	}
	return p, func() { db.Close() }, nil
}

// Migrations lists every migration of the database at path with whether it
// is applied. A missing database is an error wrapping fs.ErrNotExist.
func Migrations(ctx context.Context, path string) ([]MigrationState, error) {
	p, done, err := existing(ctx, path)
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := status(ctx, p)
	if err != nil {
		return nil, err
	}
	return sqljournal.States(st), nil
}

// Pending reports whether migrations remain to be applied to the database at
// path (true for a database that does not exist yet).
func Pending(ctx context.Context, path string) (bool, error) {
	p, done, err := existing(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer done()
	return p.HasPending(ctx)
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
	p, done, err := existing(ctx, path)
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

// pendingAt lists the versions not applied to the database at path (every
// version when there is no database yet).
func pendingAt(ctx context.Context, path string) ([]int64, error) {
	p, done, err := existing(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return allVersions()
	}
	if err != nil {
		return nil, err
	}
	defer done()
	return pending(ctx, p)
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
