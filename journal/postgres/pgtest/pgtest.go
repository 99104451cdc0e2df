// Package pgtest gives tests a private, migrated PostgreSQL schema.
//
// The server comes from TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). When it does not
// answer, tests fail if CI or IDEMGATE_REQUIRE_POSTGRES is set, and are
// skipped with a loud message otherwise.
//
// It imports journal, journal/postgres and pgx; only tests and
// internal/testkit/daemontest import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres"
)

// DefaultURL is used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test server's URL.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Required reports whether a missing PostgreSQL must fail the tests.
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("IDEMGATE_REQUIRE_POSTGRES") != ""
}

// Schema creates a fresh schema, migrates it and returns a URL whose
// search_path points at it. The schema is dropped when the test ends.
func Schema(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := newSchema(ctx, tb)
	pool := Pool(tb, withSearchPath(URL(), schema))
	defer pool.Close()
	if _, err := postgres.Migrate(ctx, pool, nil); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	return withSearchPath(URL(), schema)
}

// EmptySchema creates a fresh schema with no journal in it (nothing
// migrated) and returns a URL whose search_path points at it. The schema is
// dropped when the test ends.
func EmptySchema(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return withSearchPath(URL(), newSchema(ctx, tb))
}

// Pool returns a small pool on dsn (a URL from Schema or EmptySchema),
// closed when the test ends; closing it earlier is allowed.
func Pool(tb testing.TB, dsn string) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("parse %s: %v", dsn, err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// newSchema creates a schema dropped when the test ends, or skips (fails
// in CI) when PostgreSQL does not answer.
func newSchema(ctx context.Context, tb testing.TB) string {
	tb.Helper()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		if Required() {
			tb.Fatalf("PostgreSQL is required here but does not answer at TEST_DATABASE_URL: %v", err)
		}
		tb.Skipf("SKIPPING: no PostgreSQL at %s (set TEST_DATABASE_URL; CI fails instead of skipping): %v", URL(), err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, URL())
		if err != nil {
			tb.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Logf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

func withSearchPath(url, schema string) string {
	sep := "?"
	for i := 0; i < len(url); i++ {
		if url[i] == '?' {
			sep = "&"
			break
		}
	}
	return url + sep + "search_path=" + schema
}

// Store opens a store on a fresh schema, closed when the test ends. Schema
// migrated it; the store only checks that.
func Store(tb testing.TB) *postgres.Store {
	tb.Helper()
	dsn := Schema(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, dsn, postgres.Config{Migrations: journal.RequireMigrated})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}
