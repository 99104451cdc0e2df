package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
)

// BenchmarkJournal is the journal's shared benchmark (journaltest.Benchmark)
// on a file on disk, one caller: claiming and completing a batch of fresh
// keys is two write transactions, so two fsyncs, per batch; a replay is a
// plain read on the reader pool. Compare with BenchmarkCommitFloor, one
// fsync per operation, measured on the same disk.
func BenchmarkJournal(b *testing.B) {
	journaltest.Benchmark(b, func(b *testing.B) (journal.Store, func()) { return open(b), func() {} }, journaltest.BenchOptions{Callers: 1})
}

// BenchmarkCommitFloor is the baseline: one single-row INSERT committed per
// operation with the store's settings (WAL, synchronous FULL), the ceiling of
// any design that pays one fsync per operation on this disk.
func BenchmarkCommitFloor(b *testing.B) {
	path := filepath.Join(b.TempDir(), "floor.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	require.NoError(b, err)
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	_, err = db.ExecContext(ctx, `CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL) STRICT`)
	require.NoError(b, err)
	ops := 0
	b.ResetTimer()
	for b.Loop() {
		ops++
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (?1, 'x')`, fmt.Sprint(ops)); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "ops/s")
}
