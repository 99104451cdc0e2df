package worker_test

// End-to-end benchmarks of the daemon on this machine, beside a raw baseline
// measured in the same process:
//
//	go test -run '^$' -bench 'Daemon|RawBaseline|InFlight' -benchtime=1x -count=3 ./worker/
//
// Every iteration pre-loads its commands (20 % of them duplicates of an
// earlier command) into a fresh embedded JetStream server and migrates a fresh
// PostgreSQL schema, then measures from the first fetch until JetStream
// reports every command acknowledged. Figures are per command: ops/s, the
// fetch-to-ack latency p50/p99 in milliseconds and the allocations of the
// whole process (the embedded NATS server included, the same for both).
//
//   - BenchmarkRawBaseline fetches, decodes with encoding/json, claims with the
//     store's exact SQL (one statement inserting the new keys and reading
//     the others), calls the no-op adapter inline, completes with the store's
//     exact statement, publishes results asynchronously and acks each command
//     as its PubAck arrives: the work the daemon does, with no abstraction
//     (internal/rawbaseline, the loop scripts/e2ebench runs too).
//   - BenchmarkDaemon runs the worker with its defaults and a no-op adapter,
//     and reports x-raw, its ops/s over the median of the raw runs made
//     earlier in the same process (run both in one command).
//   - BenchmarkInFlightMemory holds 1,000 commands in flight against an adapter
//     that takes 200 ms and reports the process's peak RSS.
//
// Both also report the CPU each command cost this process (worker, embedded
// NATS server, pgx) and the pool's PostgreSQL processes: on a shared machine
// that is the steadier figure, and it names what bounds the throughput.
//
// The machine is shared: compare ratios within one run, not absolute figures
// across runs. Flags (after the package) try other settings:
// -idemgate.commands, -idemgate.rawloops, -idemgate.claimers,
// -idemgate.committers, -idemgate.completebatch, -idemgate.inflight,
// -idemgate.fetchbatch, -idemgate.pgparams.

import (
	"context"
	"flag"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/internal/testkit/rawbaseline"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

var (
	benchCommands = flag.Int("idemgate.commands", 20_000, "commands pre-loaded per benchmark iteration")
	benchRawLoops = flag.Int("idemgate.rawloops", 4, "concurrent fetch loops of the raw baseline")
	// Worker settings to try; 0 keeps the worker's default.
	benchClaimers    = flag.Int("idemgate.claimers", 0, "worker Claimers (0: default)")
	benchCommitters  = flag.Int("idemgate.committers", 0, "worker Committers (0: default)")
	benchCompleteMax = flag.Int("idemgate.completebatch", 0, "worker CompleteBatch (0: default)")
	benchMaxInFlight = flag.Int("idemgate.inflight", 0, "worker MaxInFlight (0: default)")
	benchFetchBatch  = flag.Int("idemgate.fetchbatch", 0, "consumer FetchBatch (0: default)")
	// benchPGParams sets run-time parameters on the pool's sessions. The
	// default plans every statement afresh: on a fresh journal table (no
	// statistics, autovacuum off on this server) a cached generic plan of
	// the store's read or completion can be a sequential scan or a scan of
	// the status index, whose cost grows with every row written, and which
	// connection caches which plan is luck; the figures then measure that
	// luck, not the daemon. -idemgate.pgparams= runs the server's stock
	// settings.
	benchPGParams = flag.String("idemgate.pgparams", "plan_cache_mode=force_custom_plan",
		"session parameters for the journal pool, name=value,...")
)

// commandsPerIteration is -idemgate.commands; with -short and the flag
// left alone, 1,000: enough to exercise every path when scripts/test runs
// each benchmark once, too few for figures.
func commandsPerIteration() int {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "idemgate.commands" })
	if testing.Short() && !set {
		return 1000
	}
	return *benchCommands
}

// benchConfig is the worker configuration under test: the defaults, unless
// a flag sets a field.
func benchConfig() worker.Config {
	return worker.Config{Owner: benchOwner, Claimers: *benchClaimers, Committers: *benchCommitters, CompleteBatch: *benchCompleteMax, MaxInFlight: *benchMaxInFlight}
}

const (
	// benchDupGap: a duplicate repeats the command this many places earlier in
	// the stream. It exceeds MaxInFlight, so the original is finished when the
	// duplicate arrives and the duplicate is a replay (a duplicate arriving
	// while its original runs is answered pending and comes back after the
	// lease, which would measure the lease, not the daemon).
	benchDupGap = 4001
	// benchPoolConns: claims of concurrent fetch batches, the group commit and
	// the heartbeat each hold a connection for one round trip.
	benchPoolConns = 8
	benchEnv       = "bench"
	benchOwner     = "bench-worker"
	benchApproval  = "appr-bench"
	benchResult    = `{"business_status":"succeeded"}`
)

// rawOps holds the ops/s of the raw baseline runs made in this process.
var rawOps struct {
	sync.Mutex
	runs []float64
}

// noop is the target of the benchmarks: it answers at once (or after delay)
// with an object id derived from the key, and tracks how many calls run at once.
type noop struct {
	delay          time.Duration
	running, peak  atomic.Int64
	calls, lookups atomic.Int64
}

func (*noop) Name() string         { return "noop" }
func (*noop) TargetSystem() string { return "payments" }
func (*noop) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{NativeKey: true, Lookup: true, MaxKeyLen: 255}
}

func (n *noop) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	n.calls.Add(1)
	if n.delay > 0 {
		now := n.running.Add(1)
		defer n.running.Add(-1)
		for p := n.peak.Load(); now > p && !n.peak.CompareAndSwap(p, now); p = n.peak.Load() {
		}
		t := time.NewTimer(n.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return adapters.Outcome{}, adapters.NewError(adapters.CodeTimeoutAfterRequestSent, adapters.ReconcileBeforeRetry, ctx.Err())
		}
	}
	return adapters.Outcome{ObjectID: objectID(op.EventID), BusinessStatus: "succeeded"}, nil
}

func (n *noop) Lookup(context.Context, operation.Operation) (adapters.LookupResult, error) {
	n.lookups.Add(1)
	return adapters.LookupResult{Status: adapters.NotFound}, nil
}

func objectID(eventID string) string { return "obj-" + eventID }

// stage is one benchmark iteration's infrastructure: a JetStream server with
// the commands pre-loaded and a migrated PostgreSQL schema.
type stage struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	cons     jetstream.Consumer
	ncfg     consumer.Config
	pool     *pgxpool.Pool
	pgPIDs   []int // server processes of the pool's connections
	total    int   // commands pre-loaded
	distinct int   // distinct operation keys among them
}

func newStage(b *testing.B, commands int, duplicates bool) *stage {
	b.Helper()
	ctx := context.Background()
	ns := natstest.Start(b)
	nc, js := ns.Connect(b)
	s := &stage{nc: nc, js: js, total: commands}
	s.ncfg = consumer.Config{FetchWait: 50 * time.Millisecond, FetchBatch: *benchFetchBatch}.WithDefaults()
	cons, err := consumer.Ensure(ctx, js, s.ncfg)
	if err != nil {
		b.Fatal(err)
	}
	s.cons = cons

	// Commands are published without Nats-Msg-Id, as redeliveries and late
	// duplicates past the dedup window reach the daemon.
	events := make([]int, commands)
	futs := make([]jetstream.PubAckFuture, 0, 1000)
	for p := range commands {
		if duplicates && p >= benchDupGap && p%4 == 0 {
			events[p] = events[p-benchDupGap]
		} else {
			events[p] = s.distinct
			s.distinct++
		}
		ev := "evt-" + strconv.Itoa(events[p])
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: wire.CommandSubject("payment.charge"),
			Data: charge(ev, "order-"+ev, 1000+events[p])})
		if err != nil {
			b.Fatalf("pre-load: %v", err)
		}
		futs = append(futs, f)
		if len(futs) == cap(futs) || p == commands-1 {
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					b.Fatalf("pre-load: %v", err)
				}
			}
			futs = futs[:0]
		}
	}

	pcfg, err := pgxpool.ParseConfig(pgtest.Schema(b))
	if err != nil {
		b.Fatal(err)
	}
	if pcfg.ConnConfig.TLSConfig != nil {
		b.Logf("TLS is on for %s: expect about 30%% less throughput than with sslmode=disable", pgtest.URL())
	}
	pcfg.MaxConns = benchPoolConns
	for _, kv := range strings.Split(*benchPGParams, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			pcfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	s.pool = pool
	// Open every connection before the clock starts.
	var conns []*pgxpool.Conn
	for range benchPoolConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		var pid int
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			b.Fatal(err)
		}
		s.pgPIDs = append(s.pgPIDs, pid)
		c.Release()
	}
	return s
}

// drained waits until JetStream holds no pending or unacknowledged command.
func (s *stage) drained(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ci, err := s.cons.Info(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Stream >= uint64(s.total) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("not drained: %d pending, %d unacknowledged", ci.NumPending, ci.NumAckPending)
		}
		time.Sleep(2 * time.Millisecond) // polling the server, not waiting for our own goroutines
	}
}

// latencies collects fetch-to-ack durations and signals when want arrived.
type latencies struct {
	mu   sync.Mutex
	d    []time.Duration
	want int
	all  chan struct{}
}

func newLatencies(want int) *latencies {
	return &latencies{d: make([]time.Duration, 0, want), want: want, all: make(chan struct{})}
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	if len(l.d) == l.want {
		close(l.all)
	}
	l.mu.Unlock()
}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// measure runs body with the benchmark timer on and reports the figures.
func measure(b *testing.B, s *stage, lat *latencies, body func()) float64 {
	b.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	goCPU, pgCPU := processCPU(), s.serverCPU()
	b.ResetTimer()
	body()
	select {
	case <-lat.all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d commands finished", len(lat.d), s.total)
	}
	s.drained(b)
	b.StopTimer()
	goCPU, pgCPU = processCPU()-goCPU, s.serverCPU()-pgCPU
	runtime.ReadMemStats(&after)
	ops := float64(s.total) / b.Elapsed().Seconds()
	b.ReportMetric(ops, "ops/s")
	b.ReportMetric(float64(lat.quantile(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat.quantile(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(s.total), "allocs/cmd")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(s.total), "B/cmd")
	// CPU per command, this process (worker, NATS server, pgx) and the
	// PostgreSQL processes serving the pool: what bounds the figure when the
	// machine's cores are the limit, whatever else runs on it.
	n := float64(s.total)
	b.ReportMetric(float64(goCPU.Microseconds())/n, "go-cpu-us/cmd")
	b.ReportMetric(float64(pgCPU.Microseconds())/n, "pg-cpu-us/cmd")
	b.ReportMetric(0, "ns/op")
	return ops
}

// BenchmarkRawBaseline is the daemon's work with no daemon around it: see the
// file comment.
func BenchmarkRawBaseline(b *testing.B) {
	s := newStage(b, commandsPerIteration()*b.N, true)
	q := postgres.HotPath()
	lat := newLatencies(s.total)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var loops sync.WaitGroup
	errs := make(chan error, *benchRawLoops)
	ops := measure(b, s, lat, func() {
		for range *benchRawLoops {
			loops.Add(1)
			go func() {
				defer loops.Done()
				if err := newRawLoop(s, q, lat).Run(ctx); err != nil {
					errs <- err
					cancel()
				}
			}()
		}
		go func() {
			select {
			case err := <-errs:
				b.Errorf("raw loop: %v", err)
				lat.mu.Lock()
				if len(lat.d) < lat.want {
					lat.want = -1
					close(lat.all)
				}
				lat.mu.Unlock()
			case <-ctx.Done():
			}
		}()
	})
	cancel()
	loops.Wait()
	rawOps.Lock()
	rawOps.runs = append(rawOps.runs, ops)
	rawOps.Unlock()
}

// countingStore counts the journal's batch calls and their sizes.
type countingStore struct {
	journal.Store
	claims, claimed, completes, completed atomic.Int64
}

func (c *countingStore) Claim(ctx context.Context, reqs []journal.ClaimRequest) ([]journal.Claim, error) {
	c.claims.Add(1)
	c.claimed.Add(int64(len(reqs)))
	return c.Store.Claim(ctx, reqs)
}

func (c *countingStore) Complete(ctx context.Context, cs []journal.Completion) ([]error, error) {
	c.completes.Add(1)
	c.completed.Add(int64(len(cs)))
	return c.Store.Complete(ctx, cs)
}

// report gives the mean sizes of claim and completion batches.
func (c *countingStore) report(b *testing.B) {
	if n := c.claims.Load(); n > 0 {
		b.ReportMetric(float64(c.claimed.Load())/float64(n), "keys/claim")
	}
	if n := c.completes.Load(); n > 0 {
		b.ReportMetric(float64(c.completed.Load())/float64(n), "keys/complete")
	}
}

// BenchmarkDaemon runs the worker with its default configuration.
func BenchmarkDaemon(b *testing.B) {
	s := newStage(b, commandsPerIteration()*b.N, true)
	target := &noop{}
	lat := newLatencies(s.total)
	m := worker.NewMetrics(nil)
	worker.ObserveDurations(m, lat.add)
	store := &countingStore{Store: postgres.New(s.pool, postgres.Config{})}
	w, err := worker.New(benchConfig(), s.ncfg, worker.Deps{
		Store: store, JS: s.js, NC: s.nc, Consumer: s.cons,
		Decoder:  &operation.Decoder{Env: benchEnv},
		Adapters: map[string]adapters.Adapter{"payment.charge": target},
		Metrics:  m,
	})
	if err != nil {
		b.Fatal(err)
	}
	ops := measure(b, s, lat, func() {
		if err := w.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
	w.Stop()
	store.report(b)
	if got := int(target.calls.Load()); got != s.distinct {
		b.Fatalf("%d calls for %d distinct keys", got, s.distinct)
	}
	rawOps.Lock()
	defer rawOps.Unlock()
	if len(rawOps.runs) > 0 {
		runs := slices.Clone(rawOps.runs)
		slices.Sort(runs)
		b.ReportMetric(ops/runs[len(runs)/2], "x-raw")
	}
}

// BenchmarkInFlightMemory holds 1,000 commands (the default MaxInFlight) in
// flight against an adapter that takes 200 ms, and reports the peak RSS of
// the whole process (embedded NATS server included) and the peak number of
// calls running at once.
func BenchmarkInFlightMemory(b *testing.B) {
	calls := 5000
	if testing.Short() {
		calls = 1000 // one MaxInFlight's worth: still holds 1,000 at once
	}
	s := newStage(b, calls*b.N, false)
	target := &noop{delay: 200 * time.Millisecond}
	lat := newLatencies(s.total)
	m := worker.NewMetrics(nil)
	worker.ObserveDurations(m, lat.add)
	w, err := worker.New(benchConfig(), s.ncfg, worker.Deps{
		Store: postgres.New(s.pool, postgres.Config{}), JS: s.js, NC: s.nc, Consumer: s.cons,
		Decoder:  &operation.Decoder{Env: benchEnv},
		Adapters: map[string]adapters.Adapter{"payment.charge": target},
		Metrics:  m,
	})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	base := rss()
	var peak atomic.Uint64
	quit, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if r := rss(); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-t.C:
			case <-quit:
				return
			}
		}
	}()
	measure(b, s, lat, func() {
		if err := w.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
	close(quit)
	<-sampled
	w.Stop()
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(base)/(1<<20), "base-RSS-MiB")
	b.ReportMetric(float64(target.peak.Load()), "peak-in-flight")
}

// processCPU returns the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU returns the CPU time the pool's PostgreSQL processes have used
// (Linux /proc, when the server runs on this machine; 0 otherwise).
func (s *stage) serverCPU() time.Duration {
	var ticks int64
	for _, pid := range s.pgPIDs {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0
		}
		// Fields after the command name (which may hold spaces): state is
		// field 3, utime 14 and stime 15.
		i := strings.LastIndexByte(string(st), ')')
		f := strings.Fields(string(st)[i+1:])
		if len(f) < 13 {
			return 0
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + k
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// rss returns the process's resident set in bytes: VmRSS on Linux, the Go
// runtime's mapped memory elsewhere.
func rss() uint64 {
	if st, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(st)) {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	sm := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(sm)
	return sm[0].Value.Uint64()
}

// newRawLoop is one fetch loop of the baseline (internal/rawbaseline, which
// scripts/e2ebench runs too) against the no-op target, called inline.
func newRawLoop(s *stage, q postgres.HotPathSQL, lat *latencies) *rawbaseline.Loop {
	return rawbaseline.New(rawbaseline.Config{
		Consumer: s.cons, JS: s.js, Pool: s.pool, SQL: q,
		Env: benchEnv, Owner: benchOwner, Target: "payments",
		FetchBatch: s.ncfg.FetchBatch, FetchWait: s.ncfg.FetchWait,
		Call: func(_ context.Context, _ string, cmd *operation.Command) (string, string, error) {
			return objectID(cmd.EventID), benchResult, nil
		},
		Acked: func(fetched time.Time) { lat.add(time.Since(fetched)) },
	})
}
