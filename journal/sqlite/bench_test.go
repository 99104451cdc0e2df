package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// benchReq is a claim of a fresh or known key, shaped as the worker sends it.
func benchReq(k string) journal.ClaimRequest {
	return journal.ClaimRequest{
		Key: k, OperationType: "payment.charge", TargetSystem: "payments",
		RequestHash: "28a4262860864e5110d391a4556da2ad2f539ae2f87e52871f80cb7381d86aa6",
		EventID:     "evt-" + k, ApprovalID: "appr-77", Owner: "bench-worker", LeaseTTL: 30 * time.Second,
	}
}

// report adds operations per second and allocations per operation (one
// operation is one key, so batches of different sizes compare).
func report(b *testing.B, ops int, before *runtime.MemStats) {
	b.StopTimer()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(ops), "allocs/key")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(ops), "B/key")
}

// BenchmarkClaimComplete measures the worker's journal path on a file on
// disk: claim a batch of fresh keys, then complete it (two write
// transactions, so two fsyncs, per batch), and replays of finished keys (a
// plain read on the reader pool). Compare with BenchmarkCommitFloor, one
// fsync per operation, measured on the same disk.
func BenchmarkClaimComplete(b *testing.B) {
	for _, batch := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("fresh/batch=%d", batch), func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			reqs := make([]journal.ClaimRequest, batch)
			done := make([]journal.Completion, batch)
			result := []byte(`{"business_status":"succeeded"}`)
			seq := 0
			b.ReportAllocs()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				for i := range reqs {
					seq++
					reqs[i] = benchReq(fmt.Sprintf("bench:payment.charge:op-%d:v1", seq))
				}
				got, err := s.Claim(ctx, reqs)
				if err != nil {
					b.Fatal(err)
				}
				for i, c := range got {
					if c.Decision != journal.Execute {
						b.Fatalf("%s: %s", c.Record.Key, c.Decision)
					}
					done[i] = journal.Completion{Key: c.Record.Key, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_1", Result: result}
				}
				errs, err := s.Complete(ctx, done)
				if err != nil {
					b.Fatal(err)
				}
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b, seq, &before)
		})
	}
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("replay/batch=%d", batch), func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			reqs := make([]journal.ClaimRequest, batch)
			for i := range reqs {
				reqs[i] = benchReq(fmt.Sprintf("bench:payment.charge:done-%d:v1", i))
			}
			got, err := s.Claim(ctx, reqs)
			require.NoError(b, err)
			done := make([]journal.Completion, batch)
			for i, c := range got {
				done[i] = journal.Completion{Key: c.Record.Key, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_1"}
			}
			_, err = s.Complete(ctx, done)
			require.NoError(b, err)
			ops := 0
			b.ReportAllocs()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				got, err := s.Claim(ctx, reqs)
				if err != nil {
					b.Fatal(err)
				}
				if got[0].Decision != journal.ReplaySucceeded {
					b.Fatalf("%s", got[0].Decision)
				}
				ops += batch
			}
			report(b, ops, &before)
		})
	}
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
