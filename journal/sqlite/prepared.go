package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// stmtCache holds the store's static queries prepared on one *sql.DB, so
// that SQLite parses each once per connection rather than on every call.
type stmtCache map[string]*sql.Stmt

func prepareAll(ctx context.Context, db *sql.DB, queries ...string) (stmtCache, error) {
	c := make(stmtCache, len(queries))
	for _, q := range queries {
		if _, dup := c[q]; dup {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
		c[q] = st
	}
	return c, nil
}

func (c stmtCache) close() {
	for _, st := range c {
		_ = st.Close()
	}
}

// writeQueries run inside write transactions; readQueries on the reader pool.
var (
	writeQueries = []string{
		selectNow, selectRecordsAt, claimInsert, claimRetry, claimTakeOver, insertAttempts, abandonAttempts,
		complete, completeAttempts, fenceAttempts, completeCheck, heartbeat, takeOverStale, takeOverKeys,
		moveFirstAttempts, clearFirstAttempts,
		resolveCheck, resolve, resolveAttempt, raiseForReview, purge,
	}
	readQueries = []string{selectNow, selectRecords, selectRecord, completeCheck, selectAttempts, listUnresolved}
)

// querier is what reads need; readDB and writeTx implement it with the
// prepared statements.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readDB runs queries on the reader pool.
type readDB struct {
	db    *sql.DB
	stmts stmtCache
}

func (r readDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st, ok := r.stmts[query]; ok {
		return st.QueryContext(ctx, args...)
	}
	return r.db.QueryContext(ctx, query, args...)
}

func (r readDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st, ok := r.stmts[query]; ok {
		return st.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, query, args...)
}

// writeTx is a write transaction with its time on SQLite's clock (now, in
// milliseconds); it runs queries as the writer's prepared statements.
type writeTx struct {
	tx    *sql.Tx
	stmts stmtCache
	now   int64
}

func (w *writeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st, ok := w.stmts[query]; ok {
		return w.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return w.tx.QueryContext(ctx, query, args...)
}

func (w *writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st, ok := w.stmts[query]; ok {
		return w.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return w.tx.QueryRowContext(ctx, query, args...)
}

func (w *writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st, ok := w.stmts[query]; ok {
		return w.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return w.tx.ExecContext(ctx, query, args...)
}
