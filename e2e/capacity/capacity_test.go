package capacity

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/testkit/pgproc"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/worker"
)

// rows is how many operations each phase writes. CI runs the default; the
// figures of docs/scaling.md come from
//
//	go test -count=1 -v -run TestJournalGrowthAndRetention ./e2e/capacity/ -capacity.rows=200000
var rows = flag.Int("capacity.rows", 10000, "operations written per phase")

// batch is the worker's claim and completion batch (nats.fetch_batch).
const batch = 100

// result is a target's answer as the journal keeps it: an invoice from the
// 1C emulator has about this shape and size.
var result = json.RawMessage(`{"Ref_Key":"3e96e815-261f-5872-aaf2-73391ce12a0d","Number":"0000-000042","Date":"2030-01-15T10:00:00","Контрагент_Key":"cust-42","СуммаДокумента":1250.00,"ВалютаДокумента":"RUB","Комментарий":"idemgate test:invoice.create:order-000042:v1"}`)

// write claims and completes n operations with keys prefix-0…, batch by
// batch over conns connections, as the worker does, and returns the rate
// (operations per second).
func write(ctx context.Context, t *testing.T, st *postgres.Store, prefix string, n, conns int) float64 {
	return writeBatches(ctx, t, st, prefix, n, conns, batch)
}

// writeBatches is write with another batch size.
func writeBatches(ctx context.Context, t *testing.T, st *postgres.Store, prefix string, n, conns, batch int) float64 {
	t.Helper()
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	per := (n + conns - 1) / conns
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := w * per; lo < min(n, (w+1)*per); lo += batch {
				hi := min(lo+batch, (w+1)*per, n)
				reqs := make([]journal.ClaimRequest, 0, hi-lo)
				for i := lo; i < hi; i++ {
					key := fmt.Sprintf("prod:invoice.create:%s-%07d:v1", prefix, i)
					reqs = append(reqs, journal.ClaimRequest{Key: key, OperationType: "invoice.create",
						RequestHash:  "9f2c4e1a7b3d5f8e0a6c2b4d8f1e3a5c7b9d0f2e4a6c8b0d2f4e6a8c0b2d4f6e",
						TargetSystem: "onec", EventID: "evt-" + key, Owner: fmt.Sprintf("capacity-%d", w),
						LeaseTTL: time.Minute, FieldDigests: "amount_minor=1a2b3c4d,currency=5e6f7a8b,customer_id=9c0d1e2f,due_date=3a4b5c6d,order_id=7e8f9a0b"})
				}
				claims, err := st.Claim(ctx, reqs)
				if err != nil {
					errs <- err
					return
				}
				cs := make([]journal.Completion, 0, len(claims))
				for i, c := range claims {
					if c.Decision != journal.Execute {
						errs <- fmt.Errorf("%s: decision %s", reqs[i].Key, c.Decision)
						return
					}
					cs = append(cs, journal.Completion{Key: reqs[i].Key, Token: c.Token, Status: journal.StatusSucceeded,
						TargetObjectID: "3e96e815-261f-5872-aaf2-73391ce12a0d", Result: result, TargetRequestID: "req-" + reqs[i].Key})
				}
				per, err := st.Complete(ctx, cs)
				if err != nil {
					errs <- err
					return
				}
				for _, e := range per {
					if e != nil {
						errs <- e
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return float64(n) / time.Since(began).Seconds()
}

// size is the journal's size on disk: both tables with their indexes and
// TOAST (pg_total_relation_size).
func size(ctx context.Context, t *testing.T, st *postgres.Store) int64 {
	t.Helper()
	var b int64
	require.NoError(t, st.Pool().QueryRow(ctx,
		`SELECT pg_total_relation_size('agent_operation_log') + pg_total_relation_size('agent_operation_attempts')`).Scan(&b))
	return b
}

// breakdown is the tables' heap and index sizes, for the log.
func breakdown(ctx context.Context, t *testing.T, st *postgres.Store) string {
	t.Helper()
	var heap, idx int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT
	  pg_table_size('agent_operation_log') + pg_table_size('agent_operation_attempts'),
	  pg_indexes_size('agent_operation_log') + pg_indexes_size('agent_operation_attempts')`).Scan(&heap, &idx))
	return fmt.Sprintf("tables %d B, indexes %d B", heap, idx)
}

func count(ctx context.Context, t *testing.T, st *postgres.Store) int64 {
	t.Helper()
	var n int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_operation_log`).Scan(&n))
	return n
}

// vacuum runs VACUUM twice, as autovacuum's successive passes would: the
// second recycles the index pages the first emptied.
func vacuum(ctx context.Context, t *testing.T, st *postgres.Store) {
	t.Helper()
	for range 2 {
		for _, tbl := range []string{"agent_operation_attempts", "agent_operation_log"} {
			_, err := st.Pool().Exec(ctx, "VACUUM (ANALYZE) "+tbl)
			require.NoError(t, err)
		}
	}
}

// privateStore is a migrated journal on a PostgreSQL server of the test's
// own (initdb, fsync on): no other session's open transaction holds back
// VACUUM, and no other database competes for its buffers.
func privateStore(ctx context.Context, t *testing.T) *postgres.Store {
	t.Helper()
	dir, err := os.MkdirTemp("", "idemgate-capacity-pg-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	srv, err := pgproc.InitPrimary(filepath.Join(dir, "pg"), "capacity")
	t.Cleanup(func() {
		if srv != nil {
			_ = srv.Remove()
		}
		_ = os.RemoveAll(dir)
	})
	require.NoError(t, err)
	st, err := postgres.Open(ctx, srv.URL("capacity"), postgres.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	_, err = postgres.Migrate(ctx, st.Pool(), nil)
	require.NoError(t, err)
	return st
}

// TestJournalGrowthAndRetention (budget ≤ 1 min at the default size):
// writes -capacity.rows operations the way the worker does (claim and
// complete in batches of 100, 4 connections), measures bytes per operation,
// on a PostgreSQL of its own, lets the janitor delete them all once expired and measures its rate,
// then writes as many again while the janitor runs and checks that the
// journal's size stays flat once VACUUM has made the deleted space
// reusable: retention bounds the journal at (rows kept) × (bytes per row).
func TestJournalGrowthAndRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("capacity: writes tens of thousands of journal rows; skipped with -short")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	st := privateStore(ctx, t)
	n := *rows
	empty := size(ctx, t, st)

	insertRate := write(ctx, t, st, "a", n, 4)
	require.EqualValues(t, n, count(ctx, t, st))
	vacuum(ctx, t, st)
	full := size(ctx, t, st)
	fullParts := breakdown(ctx, t, st)
	perRow := float64(full-empty) / float64(n)

	// Everything written so far is past a 1 ms retention.
	time.Sleep(10 * time.Millisecond)
	jan, err := worker.NewJanitor(worker.JanitorConfig{Retention: time.Millisecond}, st, nil)
	require.NoError(t, err)
	delBegan := time.Now()
	deleted, err := jan.RunOnce(ctx)
	require.NoError(t, err)
	deleteRate := float64(deleted) / time.Since(delBegan).Seconds()
	require.EqualValues(t, n, deleted, "the janitor deleted every expired operation")
	require.Zero(t, count(ctx, t, st))
	var attempts int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_operation_attempts`).Scan(&attempts))
	require.Zero(t, attempts, "attempts go with their operation")
	afterDelete := size(ctx, t, st)
	vacuum(ctx, t, st)

	// Steady state: the janitor runs while the second generation is written;
	// the space of the first is reused.
	var (
		mu        sync.Mutex
		concDel   int64
		stop      = make(chan struct{})
		janDone   = make(chan struct{})
		janPasses int
	)
	go func() {
		defer close(janDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			d, err := jan.RunOnce(ctx)
			if err != nil {
				t.Errorf("janitor: %v", err)
				return
			}
			mu.Lock()
			concDel += d
			janPasses++
			mu.Unlock()
		}
	}()
	insertRate2 := write(ctx, t, st, "b", n, 4)
	close(stop)
	<-janDone
	rest, err := jan.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, concDel+rest, "every row of the second generation expired and was deleted")
	vacuum(ctx, t, st)
	insertRate3 := write(ctx, t, st, "c", n, 4)
	vacuum(ctx, t, st)
	steady := size(ctx, t, st)
	steadyParts := breakdown(ctx, t, st)
	require.Less(t, float64(steady), 1.5*float64(full),
		"after deletes and VACUUM a new generation reuses the space: %d bytes vs %d for the first", steady, full)

	t.Logf("measured (%d operations per phase, batches of %d, 4 connections): %.0f bytes per operation "+
		"(journal + attempts, indexes and TOAST; %.0f MiB per million); written at %.0f, %.0f (janitor running, %d passes) "+
		"and %.0f operations/s; janitor deleted %.0f operations/s alone; size %d B empty, %d B full, %d B after the janitor "+
		"(before VACUUM), %d B with a third generation after deletes and VACUUM (first: %s; third: %s); test %v",
		n, batch, perRow, perRow*1e6/(1<<20), insertRate, insertRate2, janPasses, insertRate3, deleteRate,
		empty, full, afterDelete, steady, fullParts, steadyParts, time.Since(began).Round(time.Millisecond))
}

// TestJournalSaturation (budget ≤ 1 min at the default size): the
// journal's write rate as writers are added, in batches of 100 (the
// worker's claim and completion batches) and of 1 (a worker with
// fetch_batch 1): where the rate stops growing, the journal is saturated
// (PostgreSQL's CPU, or its WAL flushes for single-row batches).
//
//	go test -count=1 -v -run TestJournalSaturation ./e2e/capacity/ -capacity.rows=200000
func TestJournalSaturation(t *testing.T) {
	if testing.Short() {
		t.Skip("capacity: writes tens of thousands of journal rows; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	st := privateStore(ctx, t)
	total := int64(0)
	for _, b := range []int{batch, 1} {
		line := ""
		for _, conns := range []int{1, 2, 4, 8, 16} {
			n := *rows / 4
			if b == 1 {
				n = *rows / 40 // one commit per operation: ten times fewer
			}
			rate := writeBatches(ctx, t, st, fmt.Sprintf("sat%d-%d", b, conns), n, conns, b)
			total += int64(n)
			line += fmt.Sprintf(" %d writers: %.0f/s;", conns, rate)
		}
		t.Logf("measured, batches of %d:%s", b, line)
	}
	require.Equal(t, total, count(ctx, t, st))
}
