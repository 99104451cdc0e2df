package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// Store is the PostgreSQL journal. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	db   querier // the pool (a transaction in tests)
	// hot sends the claim, completion and heartbeat statements: the pool of
	// hotPathParams when Open made the store, else db.
	hot     querier
	hotPool *pgxpool.Pool
	own     bool
	cfg     Config

	// Reader serves the plain reads, through db.
	sqljournal.Reader[pgTime, *pgTime]
}

// querier sends the store's statements: a pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

var _ journal.Store = (*Store)(nil)

// Config tunes the store. The zero value is usable; see WithDefaults.
type Config struct {
	// ClaimRounds bounds how often a claim re-decides keys whose state moved
	// between its statements (a lease that expired in between). Default 3.
	ClaimRounds int
	// Retries bounds how often a batch rolled back by a deadlock or
	// serialization failure is sent again. Default 5.
	Retries int
	// PurgeChunk is how many rows one purge statement deletes. Default 5000.
	PurgeChunk int
	// Migrations is what Open does about pending migrations (see
	// journal.MigrationPolicy); the zero value applies them. New never
	// migrates: the caller owns that pool.
	Migrations journal.MigrationPolicy
	// Logger receives goose's migration log; nil discards it.
	Logger *slog.Logger
}

// WithDefaults fills zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.ClaimRounds <= 0 {
		c.ClaimRounds = 3
	}
	sqljournal.WithDefaults(&c.Retries, &c.PurgeChunk)
	return c
}

// Open connects a pool to dsn and returns a store that closes it. Pending
// migrations are handled by cfg.Migrations: applied under the advisory lock,
// or refused with journal.ErrNotMigrated. application_name defaults to
// idemgate so the daemon shows in pg_stat_activity.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("journal database URL: %w", err)
	}
	params := pcfg.ConnConfig.RuntimeParams
	if _, ok := params["application_name"]; !ok {
		params["application_name"] = "idemgate"
	}
	// A cached generic plan for "operation_key = ANY($1)" can turn into a
	// sequential scan on a young table (measured: 16–27 ms per batch read at
	// a few thousand rows); custom plans keep to the primary key. The hot
	// path's own pool plans once instead, safely (hotPathParams).
	if _, ok := params["plan_cache_mode"]; !ok {
		params["plan_cache_mode"] = "force_custom_plan"
	}
	// The daemon holds up to two claims, two group commits, the heartbeat,
	// the reconciler and the janitor at once: pgx's default of max(4, CPUs)
	// connections would queue them.
	if !strings.Contains(dsn, "pool_max_conns") {
		pcfg.MaxConns = max(pcfg.MaxConns, 10)
	}
	hcfg := pcfg.Copy()
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("journal database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("journal database: %w", err)
	}
	err = cfg.Migrations.Prepare(ctx, "postgres journal",
		func(ctx context.Context) ([]int64, error) { return pendingVersions(ctx, pool) },
		func(ctx context.Context) ([]int64, error) { return Migrate(ctx, pool, cfg.Logger) })
	if err != nil {
		pool.Close()
		return nil, err
	}
	for k, v := range hotPathParams {
		hcfg.ConnConfig.RuntimeParams[k] = v
	}
	hot, err := pgxpool.NewWithConfig(ctx, hcfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("journal database: %w", err)
	}
	s := New(pool, cfg)
	s.hot, s.hotPool = hot, hot
	s.own = true
	return s, nil
}

// hotPathParams are the settings of the connections that send the claim,
// completion and heartbeat statements. Each of those finds a batch's rows by
// key, the same statements over and over: planned once per connection
// (force_generic_plan) instead of at every batch, which cost about a third
// of the database's CPU per operation (measured by scripts/bench: 0.10 ms
// with a plan per batch, 0.07 ms with one per connection). A generic plan
// made while the table was young would read the whole table for as long as
// the plan is cached (a sequential scan is cheapest on an empty table, and
// nothing replans it as the table grows); with sequential scans off it is
// the primary key's plan whatever the table's size. The other statements
// (the console's searches, the reconciler's scans, the purge) keep the
// first pool and a plan per execution.
var hotPathParams = map[string]string{
	"plan_cache_mode": "force_generic_plan",
	"enable_seqscan":  "off",
}

// New returns a store over an existing pool, which the caller keeps owning;
// every statement goes through it.
func New(pool *pgxpool.Pool, cfg Config) *Store {
	s := &Store{pool: pool, db: pool, hot: pool, cfg: cfg.WithDefaults()}
	s.Reader = s.newReader()
	return s
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pools if the store opened them.
func (s *Store) Close() {
	if s.own {
		s.hotPool.Close()
		s.pool.Close()
	}
}

// Now returns the database clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.db.QueryRow(ctx, selectNow).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("journal clock: %w", err)
	}
	return t, nil
}

// retryable reports whether a whole batch was rolled back by the server in a
// way that makes sending it again safe and useful.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == pgerrcode.DeadlockDetected || pe.Code == pgerrcode.SerializationFailure
	}
	return false
}

// pgTime reads a timestamptz column for sqljournal's scans; NULL is the
// zero time.
type pgTime struct{ v pgtype.Timestamptz }

func (t *pgTime) Dest() any { return &t.v }

func (t *pgTime) Time() time.Time {
	if !t.v.Valid {
		return time.Time{}
	}
	return t.v.Time
}
