package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// driverName is modernc.org/sqlite's database/sql driver.
const driverName = "sqlite"

// Store is the SQLite journal. It is safe for concurrent use, and several
// stores (in one process or several) may share one database file.
type Store struct {
	path      string
	w         *sql.DB // the one writer connection
	r         *sql.DB // read-only connections
	ws        stmtCache
	rd        readDB
	cfg       Config
	closeOnce sync.Once

	// Reader serves the plain reads, on rd.
	sqljournal.Reader[msTime, *msTime]
}

var _ journal.Store = (*Store)(nil)

// Config tunes the store. The zero value is usable; see WithDefaults.
type Config struct {
	// BusyTimeout is how long a write waits for another process's write
	// transaction on the same file before it fails. Default 5s.
	BusyTimeout time.Duration
	// Readers is the size of the read-only connection pool (Get, Attempts,
	// replays). Default 4.
	Readers int
	// Retries bounds how often a write transaction that found the database
	// busy past BusyTimeout is tried again. Default 5.
	Retries int
	// PurgeChunk is how many rows one purge transaction deletes. Default 5000.
	PurgeChunk int
	// Migrations is what Open does about pending migrations (see
	// journal.MigrationPolicy); the zero value applies them.
	Migrations journal.MigrationPolicy `mapstructure:"-" yaml:"-" json:"-"`
	// Logger receives goose's migration log; nil discards it. It is set in
	// code, never read from a configuration file.
	Logger *slog.Logger `mapstructure:"-" yaml:"-" json:"-"`
}

// WithDefaults fills zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = 5 * time.Second
	}
	if c.Readers <= 0 {
		c.Readers = 4
	}
	sqljournal.WithDefaults(&c.Retries, &c.PurgeChunk)
	return c
}

// Validate rejects settings that cannot work; zero means the default.
func (c Config) Validate() error {
	switch {
	case c.BusyTimeout < 0:
		return fmt.Errorf("%w: sqlite journal: negative busy timeout %v", journal.ErrInvalid, c.BusyTimeout)
	case c.BusyTimeout > 0 && c.BusyTimeout < time.Millisecond:
		return fmt.Errorf("%w: sqlite journal: busy timeout %v below a millisecond", journal.ErrInvalid, c.BusyTimeout)
	case c.Readers < 0:
		return fmt.Errorf("%w: sqlite journal: negative reader count %d", journal.ErrInvalid, c.Readers)
	case c.Retries < 0:
		return fmt.Errorf("%w: sqlite journal: negative retry count %d", journal.ErrInvalid, c.Retries)
	case c.PurgeChunk < 0:
		return fmt.Errorf("%w: sqlite journal: negative purge chunk %d", journal.ErrInvalid, c.PurgeChunk)
	}
	return nil
}

// dsn is the modernc.org/sqlite data source for path. The writer gets WAL,
// FULL synchronous commits (a commit is on disk when it returns: a claim that
// vanished in a power cut could let an operation execute twice), foreign keys
// (attempts leave with their operation) and BEGIN IMMEDIATE, so a write
// transaction takes the write lock before it reads. Readers are query-only.
func dsn(path string, cfg Config, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

// Open opens the journal database at path and returns a store that closes
// it. Pending migrations are handled by cfg.Migrations: applied (the file and
// its folder are created if needed), or refused with journal.ErrNotMigrated
// (a missing file is then not created).
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if path == "" {
		return nil, fmt.Errorf("%w: sqlite journal: empty path", journal.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite journal %s: %w", path, err)
	}
	where := "sqlite journal " + abs
	if cfg.Migrations == journal.RequireMigrated {
		if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
			return nil, journal.NotMigrated(where, nil)
		}
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite journal folder: %w", err)
	}
	w, err := openWriter(ctx, abs, cfg)
	if err != nil {
		return nil, err
	}
	err = cfg.Migrations.Prepare(ctx, where,
		func(ctx context.Context) ([]int64, error) { return pendingVersions(ctx, w) },
		func(ctx context.Context) ([]int64, error) { return migrate(ctx, w, cfg.Logger) })
	if err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open(driverName, dsn(abs, cfg, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	r.SetMaxOpenConns(cfg.Readers)
	r.SetMaxIdleConns(cfg.Readers)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	ws, err := prepareAll(ctx, w, writeQueries...)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	rs, err := prepareAll(ctx, r, readQueries...)
	if err != nil {
		ws.close()
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	rd := readDB{r, rs}
	return &Store{path: abs, w: w, r: r, ws: ws, rd: rd, cfg: cfg, Reader: newReader(rd)}, nil
}

// openWriter opens the one writer connection and checks that WAL took: a
// database that cannot use WAL (":memory:", some network file systems) would
// block readers behind every write.
func openWriter(ctx context.Context, path string, cfg Config) (*sql.DB, error) {
	w, err := sql.Open(driverName, dsn(path, cfg, true))
	if err != nil {
		return nil, fmt.Errorf("sqlite journal %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The connection's first statement runs the DSN's pragmas. Switching a
	// new file to WAL while another process does the same can meet
	// SQLITE_BUSY without SQLite's busy handler waiting for it (the switch
	// and the WAL's recovery are not covered by busy_timeout), so a busy
	// open is tried again for as long as busy_timeout would have waited.
	var mode string
	deadline, pause := time.Now().Add(cfg.BusyTimeout), 5*time.Millisecond
	for {
		err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil {
			break
		}
		if !busy(err) || time.Now().After(deadline) || !ctxsleep.For(ctx, pause) {
			w.Close()
			return nil, fmt.Errorf("sqlite journal %s: %w", path, err)
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
	if !strings.EqualFold(mode, "wal") {
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: journal mode is %q, not WAL", path, mode)
	}
	return w, nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the store's connections; it is safe to call twice.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.rd.stmts.close()
		s.ws.close()
		s.r.Close()
		s.w.Close()
	})
}

// Now returns SQLite's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := s.rd.QueryRowContext(ctx, selectNow).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("journal clock: %w", err)
	}
	return fromMS(ms), nil
}

func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func fromNullMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMS(v.Int64)
}

// busy reports whether err is SQLITE_BUSY: another connection held the
// write lock past the busy timeout, and nothing was applied.
func busy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY // and its extended codes
}

// write runs fn in one write transaction (BEGIN IMMEDIATE on the writer
// connection) whose time tx.now is read once from SQLite's clock, and commits: one fsync for all fn wrote. A transaction that
// found the database busy is run again, at most Retries times; fn must
// therefore derive everything from what it reads.
func (s *Store) write(ctx context.Context, fn func(tx *writeTx) error) error {
	for try := 0; ; try++ {
		err := s.writeOnce(ctx, fn)
		if err == nil || !busy(err) || try >= s.cfg.Retries || ctx.Err() != nil {
			return err
		}
	}
}

func (s *Store) writeOnce(ctx context.Context, fn func(tx *writeTx) error) (err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // a failed commit is already rolled back by the driver
		}
	}()
	w := &writeTx{tx: tx, stmts: s.ws}
	if err := w.QueryRowContext(ctx, selectNow).Scan(&w.now); err != nil {
		return fmt.Errorf("clock: %w", err)
	}
	if err := fn(w); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// checkText rejects text that SQLite would store differently from how
// PostgreSQL stores it or refuses it: invalid UTF-8 and NUL bytes.
func checkText(key, field, v string) error {
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: %s: %s is not valid UTF-8 text", journal.ErrInvalid, key, field)
	}
	return nil
}

// checkTexts checks fields, pairs of a name and a value, with checkText.
func checkTexts(key string, fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if err := checkText(key, fields[i], fields[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// msTime reads a time column of milliseconds for sqljournal's scans; NULL is
// the zero time.
type msTime struct{ v sql.NullInt64 }

func (t *msTime) Dest() any { return &t.v }

func (t *msTime) Time() time.Time { return fromNullMS(t.v) }

// newReader returns the plain reads on the reader pool rd.
func newReader(rd readDB) sqljournal.Reader[msTime, *msTime] {
	query := func(ctx context.Context, query string, args []any, read func(sqljournal.Rows) error) error {
		rows, err := rd.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return read(rows)
	}
	return sqljournal.NewReader[msTime](query, &readSQL, browseMS, searchRanges)
}
