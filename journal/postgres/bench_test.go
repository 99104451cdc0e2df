package postgres_test

// The store's benchmarks are the shared ones (journaltest.Benchmark, run by
// BenchmarkJournal), which SQLite runs too. Beside them, raw baselines send
// the same SQL straight through pgx with as little Go as possible:
//
//	go test -run '^$' -bench . -benchmem -benchtime=3s ./journal/postgres/
//
// Every benchmark runs benchCallers concurrent callers on a pool of as many
// connections. One benchmark iteration is one batch; ops/s counts operations
// (keys); allocs/operation and B/operation divide the allocations of the
// whole process, and client-cpu-ns/operation its CPU time, by the number of
// operations. The store and raw send the same SQL, so the server's work is
// the same and the difference in client-cpu-ns/operation is the store's
// overhead, measured without the noise that other load puts on elapsed time.
// Compare store with raw within one run: the machine is shared and its
// absolute figures move (BenchmarkPaired interleaves them to the same end).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

const (
	// benchCallers claim at once, on a pool of as many connections.
	benchCallers = 32
)

var (
	benchBatches = []int{1, 10, 100}
	// benchReq is the request the shared benchmark sends, whose fields the
	// raw baseline sends too.
	benchReq = journaltest.BenchRequest("")
)

// benchEnv is one private schema with a pool of benchCallers connections.
type benchEnv struct {
	pool  *pgxpool.Pool
	store *postgres.Store
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	dsn := pgtest.Schema(b)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatalf("parse DSN: %v", err)
	}
	if cfg.ConnConfig.TLSConfig != nil {
		b.Logf("TLS is on for %s: expect about 30%% less throughput than with sslmode=disable", pgtest.URL())
	}
	cfg.MaxConns = benchCallers
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatalf("pool: %v", err)
	}
	return &benchEnv{pool: pool, store: postgres.New(pool, postgres.Config{})}
}

// close releases the connections at once, so that sub-benchmarks never hold
// more than one pool's worth of the server's connections.
func (e *benchEnv) close() { e.pool.Close() }

// BenchmarkJournal is the journal's shared benchmark (journaltest.Benchmark)
// on PostgreSQL: the store's figures, to compare with SQLite's and, within
// one run, with the raw baselines below.
func BenchmarkJournal(b *testing.B) {
	journaltest.Benchmark(b, func(b *testing.B) (journal.Store, func()) {
		env := newBenchEnv(b)
		return env.store, env.close
	}, journaltest.BenchOptions{Callers: benchCallers, Batches: benchBatches})
}

// BenchmarkClaimComplete is the raw baseline of the store's
// ClaimComplete path: raw sends the store's statements (claimFirst, then
// the completion) straight through pgx.
func BenchmarkClaimComplete(b *testing.B) {
	for _, batch := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			env := newBenchEnv(b)
			b.Run("raw", func(b *testing.B) {
				keys := journaltest.BenchKeys((b.N + benchCallers) * batch)
				journaltest.RunCallers(b, benchCallers, batch, func() journaltest.BatchFunc {
					return rawClaimComplete(env.pool, keys, batch)
				})
			})
			env.close()
		})
	}
}

// BenchmarkReplay is the raw baseline of the store's Replay path: raw sends
// the store's statement (claimFirst, which inserts nothing for keys it
// knows) straight through pgx; read sends a plain SELECT of the same rows,
// the least a replay can cost.
func BenchmarkReplay(b *testing.B) {
	for _, batch := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			env := newBenchEnv(b)
			keys := journaltest.FinishedKeys(b, env.store, journaltest.ReplayKeys)
			b.Run("raw", func(b *testing.B) {
				journaltest.RunCallers(b, benchCallers, batch, func() journaltest.BatchFunc { return rawReplay(env.pool, keys, batch, false) })
			})
			b.Run("read", func(b *testing.B) {
				journaltest.RunCallers(b, benchCallers, batch, func() journaltest.BatchFunc { return rawReplay(env.pool, keys, batch, true) })
			})
			env.close()
		})
	}
}

// rawClaim holds one raw caller's argument arrays, reused batch after batch.
type rawClaim struct {
	pool                                                     *pgxpool.Pool
	keys, types, hashes, targets, events, approvals, owners  []string
	digests                                                  []string
	ttls                                                     []int64
	doneKeys, statuses, objects, codes, reqIDs, notes        []string
	tokens, holds                                            []int64
	results                                                  []*string
	reconciled                                               []bool
	resultText                                               string
	inserted, read, completed                                int
	scanKey, scanType, scanHash, scanStatus, scanTarget      string
	scanObject, scanCode, scanEvent, scanApproval, scanOwner string
	scanResult                                               []byte
	scanAttempts, scanRounds, scanRoundsTotal                int
	scanToken                                                int64
	scanLeaseUntil, scanCompletedAt, scanRaisedAt            *time.Time
	scanCreated, scanUpdated, scanNow                        time.Time
	scanLive, scanEffect, scanInserted                       bool
}

func newRawClaim(pool *pgxpool.Pool, batch int) *rawClaim {
	r := &rawClaim{pool: pool, resultText: `{"business_status":"succeeded"}`}
	fill := func(v string) []string {
		s := make([]string, batch)
		for i := range s {
			s[i] = v
		}
		return s
	}
	r.keys, r.events = make([]string, batch), make([]string, batch)
	r.types, r.hashes, r.targets = fill(benchReq.OperationType), fill(benchReq.RequestHash), fill(benchReq.TargetSystem)
	r.approvals, r.owners, r.digests = fill(benchReq.ApprovalID), fill(benchReq.Owner), fill("")
	r.ttls = make([]int64, batch)
	for i := range r.ttls {
		r.ttls[i] = benchReq.LeaseTTL.Milliseconds()
	}
	r.doneKeys, r.objects = make([]string, 0, batch), make([]string, 0, batch)
	r.tokens, r.holds = make([]int64, 0, batch), make([]int64, batch)
	r.statuses, r.codes, r.reqIDs, r.notes = fill("succeeded"), fill(""), fill(""), fill("")
	r.results = make([]*string, batch)
	for i := range r.results {
		r.results[i] = &r.resultText
	}
	r.reconciled = make([]bool, batch)
	return r
}

// claim sends the store's claimFirst for ks and scans every row.
func (r *rawClaim) claim(ctx context.Context, ks []string) error {
	copy(r.keys, ks)
	copy(r.events, ks)
	rows, _ := r.pool.Query(ctx, postgres.ClaimFirstSQL, r.keys, r.types, r.hashes, r.targets, r.events, r.approvals, r.owners, r.ttls, r.digests)
	return r.scanRecords(rows, true)
}

// readRecords sends a plain read of ks and scans every row.
func (r *rawClaim) readRecords(ctx context.Context, ks []string) error {
	copy(r.keys, ks)
	rows, _ := r.pool.Query(ctx, postgres.SelectRecordsSQL, r.keys)
	return r.scanRecords(rows, false)
}

// scanRecords scans rows of journal records (with claimFirst's inserted
// column when inserted) into reused variables, counts the rows read and
// inserted, and keeps each key and token for the completion.
func (r *rawClaim) scanRecords(rows pgx.Rows, inserted bool) error {
	r.read, r.inserted = 0, 0
	r.doneKeys, r.tokens, r.objects = r.doneKeys[:0], r.tokens[:0], r.objects[:0]
	dest := []any{&r.scanKey, &r.scanType, &r.scanHash, &r.scanStatus, &r.scanTarget,
		&r.scanObject, &r.scanResult, &r.scanCode, &r.scanAttempts,
		&r.scanEvent, &r.scanApproval, &r.scanOwner, &r.scanToken, &r.scanLeaseUntil,
		&r.scanRounds, &r.scanCreated, &r.scanUpdated, &r.scanCompletedAt,
		&r.scanRoundsTotal, &r.scanRaisedAt, &r.scanEffect, &r.scanLive, &r.scanNow}
	if inserted {
		dest = append(dest, &r.scanInserted)
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return err
		}
		r.read++
		if r.scanInserted {
			r.inserted++
		}
		r.doneKeys = append(r.doneKeys, r.scanKey)
		r.objects = append(r.objects, r.scanKey)
		r.tokens = append(r.tokens, r.scanToken)
	}
	return rows.Err()
}

func (r *rawClaim) complete(ctx context.Context) error {
	n := len(r.doneKeys)
	rows, _ := r.pool.Query(ctx, postgres.CompleteSQL, r.doneKeys, r.tokens, r.statuses[:n], r.objects,
		r.results[:n], r.codes[:n], r.reqIDs[:n], r.notes[:n], r.reconciled[:n], r.holds[:n])
	r.completed = 0
	for rows.Next() {
		if err := rows.Scan(&r.scanKey); err != nil {
			rows.Close()
			return err
		}
		r.completed++
	}
	return rows.Err()
}

func rawClaimComplete(pool *pgxpool.Pool, keys []string, batch int) journaltest.BatchFunc {
	r := newRawClaim(pool, batch)
	return func(ctx context.Context, i int) error {
		if err := r.claim(ctx, keys[i*batch:(i+1)*batch]); err != nil {
			return err
		}
		if r.inserted != batch || r.read != batch {
			return fmt.Errorf("raw claim: %d inserted, %d read of %d", r.inserted, r.read, batch)
		}
		if err := r.complete(ctx); err != nil {
			return err
		}
		if r.completed != batch {
			return fmt.Errorf("raw complete: %d of %d applied", r.completed, batch)
		}
		return nil
	}
}

func rawReplay(pool *pgxpool.Pool, keys []string, batch int, plainRead bool) journaltest.BatchFunc {
	r := newRawClaim(pool, batch)
	return func(ctx context.Context, i int) error {
		var err error
		if plainRead {
			err = r.readRecords(ctx, journaltest.Window(keys, batch, i))
		} else {
			err = r.claim(ctx, journaltest.Window(keys, batch, i))
		}
		if err != nil {
			return err
		}
		if r.inserted != 0 || r.read != batch || r.scanStatus != "succeeded" {
			return fmt.Errorf("raw replay: %d inserted, %d read of %d", r.inserted, r.read, batch)
		}
		return nil
	}
}

// BenchmarkPaired runs the store and its raw baseline (and, for replays, the
// plain read) on one pool, in turns of up to a twentieth of the run each,
// and reports their rates and the store's ratios to the other two: on a shared
// machine, load that comes and goes falls on all alike, where the separate
// benchmarks above may catch it in one and miss it in another.
func BenchmarkPaired(b *testing.B) {
	for _, path := range []string{"ClaimComplete", "Replay"} {
		b.Run(path, func(b *testing.B) {
			env := newBenchEnv(b)
			defer env.close()
			var keys []string
			if path == "Replay" {
				keys = journaltest.FinishedKeys(b, env.store, journaltest.ReplayKeys)
			}
			for _, batch := range benchBatches {
				b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
					var store, raw, read []journaltest.BatchFunc
					for range benchCallers {
						if path == "Replay" {
							store = append(store, journaltest.Replay(env.store, keys, batch))
							raw = append(raw, rawReplay(env.pool, keys, batch, false))
							read = append(read, rawReplay(env.pool, keys, batch, true))
							continue
						}
						store = append(store, freshCaller(func(keys []string) journaltest.BatchFunc { return journaltest.ClaimComplete(env.store, keys, batch) }, batch))
						raw = append(raw, freshCaller(func(keys []string) journaltest.BatchFunc { return rawClaimComplete(env.pool, keys, batch) }, batch))
					}
					runPaired(b, batch, store, raw, read)
				})
			}
		})
	}
}

// runPaired runs b.N batches on each of store, raw and read (if any), in
// turns.
func runPaired(b *testing.B, batch int, store, raw, read []journaltest.BatchFunc) {
	b.Helper()
	ctx := context.Background()
	variants := [][]journaltest.BatchFunc{store, raw}
	if read != nil {
		variants = append(variants, read)
	}
	for _, calls := range variants {
		if err := journaltest.Drive(ctx, calls, 0, benchCallers); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
	b.ResetTimer()
	// Up to 20 turns, each long enough to keep every caller busy.
	turns := max(1, min(20, b.N/(4*benchCallers)))
	spent := make([]time.Duration, len(variants))
	done := 0
	for t := range turns {
		n := (b.N*(t+1))/turns - done
		for v, calls := range variants {
			start := time.Now()
			if err := journaltest.Drive(ctx, calls, 0, n); err != nil {
				b.Fatal(err)
			}
			spent[v] += time.Since(start)
		}
		done += n
	}
	ops := float64(b.N * batch)
	b.ReportMetric(ops/spent[0].Seconds(), "store-ops/s")
	b.ReportMetric(ops/spent[1].Seconds(), "raw-ops/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "store/raw")
	if read != nil {
		b.ReportMetric(ops/spent[2].Seconds(), "read-ops/s")
		b.ReportMetric(spent[2].Seconds()/spent[0].Seconds(), "store/read")
	}
}

// freshCaller returns a caller that runs every batch it is given on keys never
// used before, drawn in blocks of 64 batches.
func freshCaller(newCall func(keys []string) journaltest.BatchFunc, batch int) journaltest.BatchFunc {
	var call journaltest.BatchFunc
	used := 64
	return func(ctx context.Context, _ int) error {
		if used == 64 {
			call, used = newCall(journaltest.BenchKeys(64*batch)), 0
		}
		used++
		return call(ctx, used-1)
	}
}
