// Command e2ebench measures the built idemgate binary end to end with a real
// target in the loop, beside a raw baseline doing the same work by hand in
// one process, in the same run (see scripts/bench, which builds and runs it):
//
//   - the YooKassa emulator (in this process) is the target, a nats-server
//     of its own (JetStream on a temporary store) the broker, and a fresh
//     schema of the PostgreSQL at -journal-url the journal;
//   - -commands payment.charge commands (every fifth a repeat of an earlier
//     intent under a new event id) are pre-loaded before each run;
//   - raw: JetStream fetch → the journal's own claim SQL (one statement:
//     new keys inserted, the others read) → one keep-alive POST /v3/payments per
//     new intent, the batch's calls at once → the journal's completion SQL
//     → async publish of each result → ack on its PubAck;
//   - daemon: `idemgate run` with its defaults and the emulator as target;
//     CPU milliseconds per command from /proc/<pid>/stat; -profile DIR has
//     it write CPU and allocation profiles (IDEMGATE_PROFILE_DIR) of that
//     run to DIR/main, and of the lost-response run to DIR/lost;
//   - replay: with the daemon still running, -replays more commands for the
//     same intents under new event ids, answered from the journal;
//   - naive: the lost-response stage (below) done by a naive journal in this
//     process, -raw-loops fetch loops, each command on its own: INSERT … ON
//     CONFLICT DO NOTHING on the key → on a fresh key one POST, a lost
//     answer retried at once without a lookup, each request under a fresh
//     Idempotence-Key (YooKassa's SDKs' default) → the answer stored →
//     async publish → ack on its PubAck; the duplicate payments it makes are
//     counted and printed, not a failure;
//   - lost: the daemon again, with -lost-rate of the emulator's answers lost
//     after the payment is made (connection closed), -lost-commands commands
//     for -lost-intents intents; the emulator's ledger must hold exactly one
//     payment per intent. Its rate is printed as a ratio to the naive
//     journal's.
//
// Each run is timed from the first result published to the last command
// acknowledged. The machine is shared: compare the ratio of one run, not
// figures across runs.
//
// It may import any package of the module: the raw baseline is
// internal/rawbaseline, the loop worker's BenchmarkRawBaseline runs too,
// which sends the journal's own statements (postgres.HotPathSQL) so that it
// does the store's exact work. Nothing imports it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/internal/testkit/childproc"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
	sbyk "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/wire"
)

const (
	env    = "bench"
	opType = operation.TypePaymentCharge
	owner  = "raw-baseline"
)

type config struct {
	bin, natsBin, journalURL string
	commands, lostCommands   int
	lostIntents              int
	lostRate                 float64
	rawLoops                 int
	naiveConns               int
	profileDir               string
	skipLost                 bool
	keepSchemas              bool
	replays                  int
	timeout                  time.Duration
	latencyCalls             int
	agents, agentCalls       int
}

func main() {
	var c config
	flag.StringVar(&c.bin, "idemgate", "", "the built idemgate binary")
	flag.StringVar(&c.natsBin, "nats-server", "", "the nats-server binary")
	flag.StringVar(&c.journalURL, "journal-url", os.Getenv("TEST_DATABASE_URL"), "PostgreSQL URL (a fresh schema per run is made in it)")
	flag.IntVar(&c.commands, "commands", 20_000, "commands per run (raw and daemon); every fifth repeats an earlier intent")
	flag.IntVar(&c.lostCommands, "lost-commands", 5000, "commands of the lost-response run")
	flag.IntVar(&c.lostIntents, "lost-intents", 4000, "intents of the lost-response run")
	flag.Float64Var(&c.lostRate, "lost-rate", 0.05, "share of the emulator's answers lost after the payment is made")
	flag.IntVar(&c.rawLoops, "raw-loops", 4, "concurrent fetch loops of the raw baseline")
	flag.IntVar(&c.naiveConns, "naive-conns", 16, "PostgreSQL connections of the naive journal (its statements are one per command)")
	flag.StringVar(&c.profileDir, "profile", "", "folder for the daemon's CPU and allocation profiles (cpu.pprof, allocs.pprof), start to exit: main/ of its main run (replays included), lost/ of the lost-response run")
	flag.BoolVar(&c.skipLost, "skip-lost", false, "leave the lost-response run out")
	flag.BoolVar(&c.keepSchemas, "keep-schemas", false, "keep each run's journal schema (dropped at the end by default) and print its name")
	flag.IntVar(&c.replays, "replays", 20_000, "commands of the replay phase after the daemon run (every intent again; 0: none)")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "bound of each run")
	flag.IntVar(&c.latencyCalls, "latency-calls", 300, "sequential new-intent calls of the latency stage, each way (HTTP API, MCP over stdio, straight to the emulator); 0: no latency stage")
	flag.IntVar(&c.agents, "agents", 20, "concurrent agents of the latency stage")
	flag.IntVar(&c.agentCalls, "agent-calls", 50, "calls each concurrent agent makes")
	flag.Parse()
	if c.bin == "" || c.natsBin == "" || c.journalURL == "" {
		fmt.Fprintln(os.Stderr, "e2ebench: -idemgate, -nats-server and -journal-url (or TEST_DATABASE_URL) are required")
		os.Exit(2)
	}
	if c.lostIntents > c.lostCommands || c.lostIntents < 1 || c.commands < 5 {
		fmt.Fprintln(os.Stderr, "e2ebench: need 1 <= -lost-intents <= -lost-commands and -commands >= 5")
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "e2ebench:", err)
		os.Exit(1)
	}
}

// bench is one invocation's infrastructure.
type bench struct {
	cfg     config
	dir     string
	natsURL string
	nats    *exec.Cmd
	nc      *nats.Conn
	js      jetstream.JetStream
	sb      *sbyk.Server
	sbURL   string
	q       postgres.HotPathSQL
	schemas []string // made by stage, dropped at the end unless -keep-schemas
}

func run(c config) error {
	dir, err := os.MkdirTemp("", "idemgate-e2ebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{cfg: c, dir: dir, q: postgres.HotPath()}
	defer b.dropSchemas()
	port, err := childproc.FreePort()
	if err != nil {
		return err
	}
	b.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	b.nats = exec.Command(c.natsBin, "-js", "-sd", filepath.Join(dir, "nats"), "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	b.nats.Stderr, b.nats.Stdout = io.Discard, io.Discard
	if err := b.nats.Start(); err != nil {
		return fmt.Errorf("nats-server: %w", err)
	}
	defer func() { _ = b.nats.Process.Kill(); _ = b.nats.Wait() }()
	if err := childproc.WaitTCP(context.Background(), fmt.Sprintf("127.0.0.1:%d", port), 30*time.Second); err != nil {
		return err
	}
	if b.nc, err = nats.Connect(b.natsURL); err != nil {
		return err
	}
	defer b.nc.Close()
	if b.js, err = jetstream.New(b.nc); err != nil {
		return err
	}

	fmt.Printf("e2ebench: %d commands (20 %% repeats) per run; target: the YooKassa emulator; journal: PostgreSQL; nats-server %s\n", c.commands, b.natsURL)
	raw, err := b.rawRun()
	if err != nil {
		return fmt.Errorf("raw baseline: %w", err)
	}
	fmt.Printf("raw baseline: %6.0f commands/s  (%d commands in %v)\n", raw.rate(), raw.commands, raw.elapsed.Round(time.Millisecond))
	lean, err := b.leanRun()
	if err != nil {
		return fmt.Errorf("lean loop: %w", err)
	}
	fmt.Printf("lean loop:    %6.0f commands/s  (%d commands in %v; one row per key, no attempts trail)\n", lean.rate(), lean.commands, lean.elapsed.Round(time.Millisecond))
	d, err := b.daemonRun(c.commands, c.commands*4/5, 0)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	fmt.Printf("daemon:       %6.0f commands/s  (%d commands in %v), %.3f ms daemon CPU per command, peak RSS %.0f MiB\n",
		d.rate(), d.commands, d.elapsed.Round(time.Millisecond), d.cpuPerCommand(), float64(d.peakRSS)/(1<<20))
	fmt.Printf("ratio:        %.2f× the raw baseline, %.2f× the lean loop\n", d.rate()/raw.rate(), d.rate()/lean.rate())
	fmt.Printf("CPU ms/command: raw baseline  %s\n", raw.shares.perCommand(raw.commands))
	fmt.Printf("                lean loop     %s\n", lean.shares.perCommand(lean.commands))
	fmt.Printf("                daemon        %s\n", d.shares.perCommand(d.commands))
	fmt.Println("                (e2ebench: the emulator, and the baseline loop itself in its runs; PostgreSQL: every postgres process here)")
	if d.replays > 0 {
		fmt.Printf("replay:       %6.0f commands/s  (%d commands answered from the journal in %v)\n",
			float64(d.replays)/d.replayed.Seconds(), d.replays, d.replayed.Round(time.Millisecond))
	}
	if d.duplicates != 0 {
		return fmt.Errorf("daemon: %d duplicate payments in the emulator's ledger", d.duplicates)
	}
	if c.latencyCalls > 0 {
		if err := b.latencyRun(); err != nil {
			return fmt.Errorf("latency: %w", err)
		}
	}
	if c.skipLost {
		return nil
	}
	nv, err := b.naiveRun(c.lostCommands, c.lostIntents, c.lostRate)
	if err != nil {
		return fmt.Errorf("naive journal: %w", err)
	}
	fmt.Printf("naive:        %6.0f commands/s  (the same lost-response run by a naive journal: key table, no lookup before a retry), %d duplicate effects\n",
		nv.rate(), nv.duplicates)
	l, err := b.daemonRun(c.lostCommands, c.lostIntents, c.lostRate)
	if err != nil {
		return fmt.Errorf("lost responses: %w", err)
	}
	fmt.Printf("lost:         %6.0f commands/s  (%d commands for %d intents, %.0f %% of answers lost), %.3f ms daemon CPU per command, %d duplicate effects\n",
		l.rate(), l.commands, c.lostIntents, c.lostRate*100, l.cpuPerCommand(), l.duplicates)
	fmt.Printf("lost ratio:   %.2f× the naive journal\n", l.rate()/nv.rate())
	if l.duplicates != 0 {
		return fmt.Errorf("lost responses: %d duplicate payments in the emulator's ledger", l.duplicates)
	}
	return nil
}

// result is one run's figures.
type result struct {
	commands   int
	elapsed    time.Duration
	cpu        time.Duration // the daemon's user+system CPU over elapsed
	shares     cpuShares     // every process's CPU over elapsed
	peakRSS    int64
	duplicates int
	replays    int           // commands of the replay phase
	replayed   time.Duration // its time
}

func (r result) rate() float64 { return float64(r.commands) / r.elapsed.Seconds() }
func (r result) cpuPerCommand() float64 {
	return float64(r.cpu) / float64(time.Millisecond) / float64(r.commands)
}

// prepare makes a fresh emulator, schema and streams, and pre-loads n
// commands for intents intents (the rest repeat earlier intents under new
// event ids, spread out). It returns the journal URL of the schema.
func (b *bench) prepare(ctx context.Context, name string, n, intents int, ncfg consumer.Config) (string, error) {
	if b.sb != nil {
		_ = b.sb.Close()
	}
	b.sb = sbyk.New(sbyk.Options{Options: sandbox.Options{Seed: 1}})
	var err error
	if b.sbURL, err = b.sb.Start(""); err != nil {
		return "", err
	}
	for _, s := range []string{ncfg.CommandsStream, ncfg.ResultsStream} {
		if err := b.js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return "", err
		}
	}
	if _, err := consumer.Ensure(ctx, b.js, ncfg); err != nil {
		return "", err
	}
	schema := fmt.Sprintf("e2ebench_%s_%d", name, time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, b.cfg.journalURL)
	if err != nil {
		return "", err
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	_ = conn.Close(ctx)
	if err != nil {
		return "", err
	}
	b.schemas = append(b.schemas, schema)
	url := withParam(b.cfg.journalURL, "search_path", schema)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return "", err
	}
	_, err = postgres.Migrate(ctx, pool, nil)
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate %s: %w", schema, err)
	}

	gap := max(1, min(4001, n/5))
	intentOf := make([]int, n)
	next := 0
	for p := range n {
		if next >= intents || (p >= gap && p%5 == 0 && n-p > intents-next) {
			intentOf[p] = intentOf[p-gap]
		} else {
			intentOf[p] = next
			next++
		}
	}
	if err := b.publish(ctx, "evt", intentOf); err != nil {
		return "", err
	}
	if next != intents {
		return "", fmt.Errorf("pre-load made %d intents, want %d", next, intents)
	}
	return url, nil
}

// dropSchemas drops the journals the runs made, so that repeated runs (one
// in every scripts/test) leave nothing behind; -keep-schemas keeps them
// for a look at the journal of a run.
func (b *bench) dropSchemas() {
	if b.cfg.keepSchemas {
		for _, s := range b.schemas {
			fmt.Fprintln(os.Stderr, "e2ebench: kept schema", s)
		}
		return
	}
	if len(b.schemas) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.cfg.journalURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2ebench: drop the run's schemas:", err)
		return
	}
	defer conn.Close(ctx)
	for _, s := range b.schemas {
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+s+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "e2ebench: drop schema %s: %v\n", s, err)
		}
	}
}

// publish sends one command per entry of intentOf, command p for intent
// intentOf[p] under the event id <prefix>-<p>: the same payload for the same
// intent, so a later command for an intent is a repeat.
func (b *bench) publish(ctx context.Context, prefix string, intentOf []int) error {
	futs := make([]jetstream.PubAckFuture, 0, 1000)
	for p, i := range intentOf {
		cmd := operation.Command{EventID: fmt.Sprintf("%s-%d", prefix, p), IntentID: fmt.Sprintf("intent-%d", i), Operation: opType,
			ApprovalID: "appr-" + strconv.Itoa(i),
			Payload:    json.RawMessage(fmt.Sprintf(`{"account_id":"pm-saved-1","order_id":"order-%d","amount_minor":%d,"currency":"RUB"}`, i, 1000+i))}
		data, err := json.Marshal(cmd)
		if err != nil {
			return err
		}
		f, err := b.js.PublishMsgAsync(&nats.Msg{Subject: wire.CommandSubject(opType), Data: data})
		if err != nil {
			return err
		}
		futs = append(futs, f)
		if len(futs) == cap(futs) || p == len(intentOf)-1 {
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			futs = futs[:0]
		}
	}
	return nil
}

// watch times a run: from the first result published until JetStream holds
// no pending or unacknowledged command and done (when not nil) is true.
func (b *bench) watch(ctx context.Context, cons jetstream.Consumer, n int, first func(), done func() (bool, error), subscribed ...chan struct{}) (time.Duration, error) {
	var started atomic.Int64
	firstSeen := make(chan struct{})
	sub, err := b.nc.Subscribe(wire.ResultSubjects, func(*nats.Msg) {
		if started.CompareAndSwap(0, time.Now().UnixNano()) {
			if first != nil {
				first()
			}
			close(firstSeen)
		}
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	for _, c := range subscribed {
		close(c)
	}
	select {
	case <-firstSeen:
	case <-ctx.Done():
		return 0, fmt.Errorf("no result published: %w", ctx.Err())
	}
	for {
		ci, err := cons.Info(ctx)
		if err != nil {
			return 0, err
		}
		if ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Consumer >= uint64(n) {
			ok := true
			if done != nil {
				if ok, err = done(); err != nil {
					return 0, err
				}
			}
			if ok {
				return time.Since(time.Unix(0, started.Load())), nil
			}
		}
		if !ctxsleep.For(ctx, 20*time.Millisecond) {
			return 0, fmt.Errorf("%d pending, %d unacknowledged: %w", ci.NumPending, ci.NumAckPending, ctx.Err())
		}
	}
}
