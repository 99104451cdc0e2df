// Package daemontest runs a real idemgate daemon in-process for tests of
// what sits in front of it (the gateway and its faces): an embedded
// JetStream server, a journal (SQLite in a temporary folder, or a private
// PostgreSQL schema), the YooKassa emulator behind the YooKassa adapter for
// payment.charge and payment.refund, the worker and the reconciler — the
// same parts `idemgate run` composes, with short leases so that lost
// responses settle within a test.
//
// It imports the parts it composes: adapters and adapters/yookassa,
// consumer and consumer/natstest, journal, journal/sqlite and
// journal/postgres/pgtest, operation, redact, sandbox/yookassa and worker.
// It is the one package of internal/testkit with arrows into the daemon's
// layers: a harness that composes them, as cmd/idemgate does, never a part
// of them. Nothing outside _test.go files imports it (deps_test.go).
package daemontest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/worker"
)

// Env is the environment of the test daemon's keys.
const Env = "test"

// Journal engines.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Daemon is a running daemon and what a test needs around it.
type Daemon struct {
	// NATS is the embedded JetStream server; NC a connection to it for the
	// test's own use (a gateway, a producer).
	NATS *natstest.Server
	NC   *nats.Conn
	JS   jetstream.JetStream
	// Journal is the daemon's journal (the gateway reads it).
	Journal journal.Store
	// YooKassa is the emulator payments go to; its ledger counts effects.
	YooKassa *sbyookassa.Server
	// Consumer is the commands and results streams' configuration.
	Consumer consumer.Config
	// Worker is the daemon's worker configuration (short leases).
	Worker worker.Config
	// Routes are the operation types the daemon has an adapter for, as a
	// gateway in front of it is told (gateway.Deps.Routed).
	Routes []string
	// processSide is set by StartWith with Options.Processes.
	processSide

	cons jetstream.Consumer
	yk   adapters.Adapter
	// targets are the adapters of the routes other than YooKassa's (the
	// processes' steps), by operation type.
	targets map[string]adapters.Adapter
	// approvals gate the worker's intents (Options.Approvals).
	approvals *worker.Approvals
}

// Start runs a daemon on the named journal engine ("sqlite" or
// "postgres"); everything stops when the test ends.
func Start(tb testing.TB, engine string) *Daemon {
	tb.Helper()
	return StartWith(tb, engine, Options{})
}

// StartWith is Start with options: processes (and the targets their steps
// need) beside the payments.
func StartWith(tb testing.TB, engine string, opts Options) *Daemon {
	tb.Helper()
	d := Prepare(tb, engine)
	if opts.Processes != nil {
		d.startTargets(tb)
	}
	if opts.Approvals {
		d.gateApprovals(tb, opts.Tokens)
		if opts.Notify != nil {
			d.notifyApprovals(tb, *opts.Notify)
		}
	}
	d.Run(tb)
	if opts.Approvals {
		d.sweepApprovals(tb)
	}
	if opts.Processes != nil {
		d.prepareProcesses(tb, opts)
	}
	return d
}

// Prepare sets up a daemon's NATS server, streams, journal and emulator
// without starting its worker and reconciler: commands published before
// Run wait in the stream, unclaimed. Run starts them.
func Prepare(tb testing.TB, engine string) *Daemon {
	tb.Helper()
	d := &Daemon{NATS: natstest.Start(tb)}
	d.NC, d.JS = d.NATS.Connect(tb)
	switch engine {
	case Postgres:
		d.Journal = pgtest.Store(tb)
	default:
		st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "journal.db"), sqlite.Config{})
		if err != nil {
			tb.Fatalf("sqlite journal: %v", err)
		}
		tb.Cleanup(st.Close)
		d.Journal = st
	}

	d.YooKassa = sbyookassa.New(sbyookassa.Options{})
	url, err := d.YooKassa.Start("127.0.0.1:0")
	if err != nil {
		tb.Fatalf("yookassa emulator: %v", err)
	}
	tb.Cleanup(func() { _ = d.YooKassa.Close() })
	shop, secret := d.YooKassa.Credentials()
	yk, err := yookassa.New(yookassa.Config{BaseURL: url, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}, HTTPConfig: adapters.HTTPConfig{Timeout: 2 * time.Second}})
	if err != nil {
		tb.Fatalf("yookassa adapter: %v", err)
	}

	// The retry policy's horizons keep their defaults (AckWait is long
	// enough for them); only the delays are short.
	d.Consumer = consumer.Config{AckWait: 15 * time.Second, FetchWait: 50 * time.Millisecond}.WithDefaults()
	d.Worker = worker.Config{
		Owner: "daemontest", LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second, HeartbeatInterval: time.Second,
		ShutdownTimeout: 5 * time.Second,
		Retry:           worker.RetryPolicy{InitialDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
	}
	ctx := context.Background()
	cons, err := consumer.Ensure(ctx, d.JS, d.Consumer)
	if err != nil {
		tb.Fatalf("streams: %v", err)
	}
	d.cons, d.yk = cons, yk
	d.Routes = []string{"payment.charge", "payment.refund"}
	return d
}

// Run starts the worker and the reconciler of a daemon Prepare set up;
// they stop when the test ends.
func (d *Daemon) Run(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	routes := map[string]adapters.Adapter{}
	for _, op := range d.Routes {
		routes[op] = d.yk
		if a, ok := d.targets[op]; ok {
			routes[op] = a
		}
	}
	deps := worker.Deps{
		Store: d.Journal, JS: d.JS, NC: d.NC, Consumer: d.cons,
		Decoder:   &operation.Decoder{Env: Env},
		Adapters:  routes,
		Log:       slog.New(slog.DiscardHandler),
		Approvals: d.approvals,
	}
	w, err := worker.New(d.Worker, d.Consumer, deps)
	if err != nil {
		tb.Fatalf("worker: %v", err)
	}
	rec, err := worker.NewReconciler(worker.ReconcilerConfig{Interval: 200 * time.Millisecond}, d.Worker, deps)
	if err != nil {
		tb.Fatalf("reconciler: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		tb.Fatalf("worker: %v", err)
	}
	tb.Cleanup(w.Stop)
	if err := rec.Start(ctx); err != nil {
		tb.Fatalf("reconciler: %v", err)
	}
	tb.Cleanup(rec.Stop)
}

// Engines are the journal engines a guarantee test runs on.
var Engines = []string{SQLite, Postgres}
