package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process/coordinator"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/worker"
)

func runCmd(stderr io.Writer) *cobra.Command {
	return serving(&cobra.Command{
		Use:   "run",
		Short: "Run the daemon: consume commands, execute each intent at most once, publish outcomes",
	}, stderr, nil, func(ctx context.Context, c Config, log *slog.Logger) error {
		setDaemonGC()
		return runDaemon(ctx, c, log, nil)
	})
}

// daemonGCPercent is the daemon's garbage-collection target when GOGC is
// not set: the heap may grow to 4× what is live before a collection, not
// 2×. Most of what a command allocates is short-lived (envelopes, HTTP
// exchanges, batch parameters): under scripts/bench, marking took ~10 %
// of the daemon's CPU at Go's default of 100 and ~3 % at 300, for ~25–30
// MiB more peak RSS with up to 1,000 commands in flight.
const daemonGCPercent = 300

// setDaemonGC applies daemonGCPercent unless GOGC is set (then the Go
// runtime has applied it already).
func setDaemonGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(daemonGCPercent)
	}
}

// daemon is a running idemgate: tests and the demo start it in-process.
type daemon struct {
	worker     *worker.Worker
	reconciler *worker.Reconciler
	janitor    *worker.Janitor
	approvals  *worker.ApprovalSweeper // nil unless approvals.enabled
	// coordinator runs the declared processes (nil when none is declared).
	coordinator *coordinator.Coordinator
	store       journalStore
	admin       *http.Server
	adminAddr   string
	natsAddr    string // the embedded NATS server's address; "" with nats.url
	adminStop   func()
	registry    *prometheus.Registry
	ingest      *ingest.Server
	faces       *faces
	console     http.Handler
	ready       atomic.Bool
}

// service is one part of the daemon: started in order, stopped in reverse.
type service struct {
	name  string
	start func() error
	stop  func()
}

// startServices starts each service in order. When one fails, those already
// started are stopped, newest first, before the error returns; otherwise
// the returned stop does the same at shutdown.
func startServices(services []service) (stop func(), err error) {
	var started []service
	stop = func() {
		for i := len(started) - 1; i >= 0; i-- {
			if started[i].stop != nil {
				started[i].stop()
			}
		}
		started = nil
	}
	for _, s := range services {
		if err := s.start(); err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		started = append(started, s)
	}
	return stop, nil
}

// serviceOf is a startstop.Service as one of the daemon's services: build
// makes it (nil: this one is not configured), then it is started with ctx;
// its Stop is the service's stop.
func serviceOf(ctx context.Context, name string, build func() (startstop.Service, error)) service {
	var s startstop.Service
	return service{name: name, start: func() error {
		built, err := build()
		if err != nil || built == nil {
			return err
		}
		if err := built.Start(ctx); err != nil {
			return err
		}
		s = built
		return nil
	}, stop: func() {
		if s != nil {
			s.Stop()
		}
	}}
}

// noRoutesWarning is logged when a daemon serves no operation type.
const noRoutesWarning = "no routes configured: commands stay in JetStream, unacknowledged, until a replica with a route for their operation serves them (see routes: in the config)"

// runDaemon runs until ctx ends, then drains. started, when set, receives
// the running daemon.
//
// Services start in this order and stop in reverse: journal, NATS (embedded
// or connected), streams, admin endpoints, worker, reconciler, janitor,
// webhook ingest, the gateway's faces. A service that fails to start stops
// those before it. The worker, reconciler, janitor and ingest are
// startstop services: ctx ending begins their stop, and Stop waits for it.
// At shutdown ingest stops taking webhooks (senders get 503 and retry), the
// worker drains its in-flight work, NATS drains (its closed handler says
// when), and the admin endpoints answer "not ready" until the end.
func runDaemon(ctx context.Context, c Config, log *slog.Logger, started func(*daemon)) error {
	r := &daemonRun{ctx: ctx, c: c, log: log, d: &daemon{registry: prometheus.NewRegistry()}}
	reg := r.d.registry
	var err error
	if r.routes, err = buildAdapters(c, log, adapters.NewMetrics(reg)); err != nil {
		return configError(err)
	}
	if r.opTypes, err = c.registry(); err != nil {
		return configError(err)
	}
	if len(r.routes) == 0 {
		log.Warn(noRoutesWarning)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	r.metrics = worker.NewMetrics(reg)
	stop, err := startServices([]service{
		{name: "journal", start: r.openJournal, stop: func() { r.d.store.Close() }},
		{name: "nats", start: r.connectNATS, stop: func() { r.stopNATS() }},
		{name: "streams", start: r.ensureStreams},
		{name: "admin", start: r.startAdmin, stop: r.stopAdmin},
		serviceOf(ctx, "worker", r.buildWorker),
		serviceOf(ctx, "reconciler", func() (startstop.Service, error) { return r.d.reconciler, nil }),
		serviceOf(ctx, "janitor", func() (startstop.Service, error) { return r.d.janitor, nil }),
		serviceOf(ctx, "approvals", r.buildApprovalSweeper),
		serviceOf(ctx, "approval notifier", r.buildNotifier),
		serviceOf(ctx, "coordinator", r.buildCoordinator),
		// Stopped first at shutdown: senders get 503 and retry elsewhere or later.
		serviceOf(ctx, "ingest", r.buildIngest),
		{name: "faces", start: r.startFaces, stop: func() {
			r.d.faces.stop() // agents' calls in flight answer pending; their commands stay in JetStream
		}},
	})
	if err != nil {
		return err
	}
	d := r.d
	d.ready.Store(true)
	log.Info("idemgate running", "env", c.Env, "owner", d.worker.Owner(), "routes", len(r.routes))
	if started != nil {
		started(d)
	}
	<-ctx.Done()

	// Drain: not ready, stop taking webhooks and fetching, let in-flight work
	// finish, never ack anything unpublished.
	d.ready.Store(false)
	log.Info("draining")
	stop()
	log.Info("stopped")
	return nil
}

// daemonRun is what runDaemon's services share as they start: each
// service's start is one of its methods, in the order runDaemon lists them.
type daemonRun struct {
	ctx     context.Context
	c       Config
	log     *slog.Logger
	d       *daemon
	routes  map[string]adapters.Adapter
	opTypes *operation.Registry
	metrics *worker.Metrics

	pending  func(context.Context) (bool, error) // the journal's pending migrations
	nc       *nats.Conn
	js       jetstream.JetStream
	cons     jetstream.Consumer
	stopNATS func()
	// notifyCons is the approval notifier's consumer (nil: approvals.notify
	// is off).
	notifyCons *consumer.NotifyFeed
}

func (r *daemonRun) openJournal() (err error) {
	r.d.store, r.pending, err = openJournal(r.ctx, r.c, r.log, daemonJournal)
	return err
}

func (r *daemonRun) connectNATS() (err error) {
	r.nc, r.js, r.stopNATS, r.d.natsAddr, err = natsConn(r.c, r.log, true)
	return err
}

func (r *daemonRun) ensureStreams() (err error) {
	r.cons, err = ensureStreams(r.ctx, r.nc, r.js, r.c, r.log)
	if err == nil && r.c.Approvals.Enabled {
		policy, perr := r.c.Approvals.policy(r.opTypes)
		if perr != nil {
			return configError(perr)
		}
		err = consumer.EnsureParked(r.ctx, r.js, r.c.NATS.Config, parkedMaxAge(policy))
		if n, on, nerr := r.c.Approvals.Notify.notifier(os.Getenv); err == nil && nerr != nil {
			return configError(nerr)
		} else if err == nil && on {
			// A POST's attempt is bounded by its timeout: the delivery is
			// redelivered only after the notifier gave up on it.
			r.notifyCons, err = consumer.EnsureNotify(r.ctx, r.js, r.c.NATS.Config, parkedMaxAge(policy), policy.MaxTTL(),
				n.Timeout+30*time.Second, n.MaxAttempts)
		}
	}
	if err == nil {
		registerHealthMetrics(r.d.registry, r.d.store, r.log)
	}
	return err
}

// startAdmin serves the admin endpoints (and the console, when enabled) on
// admin.addr, when one is set.
func (r *daemonRun) startAdmin() error {
	c, d, log := r.c, r.d, r.log
	if c.Admin.Addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", c.Admin.Addr)
	if err != nil {
		return fmt.Errorf("listener: %w", err)
	}
	d.adminAddr = ln.Addr().String()
	if c.Console.Enabled {
		con, err := newConsole(c, r.routes, d.store, r.js, r.metrics, log)
		if err != nil {
			_ = ln.Close()
			return configError(err)
		}
		d.console = con
	}
	d.admin = &http.Server{Handler: adminHandler(d, r.nc, newJournalReadiness(d.store, r.pending)), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := d.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server", "error", err.Error())
		}
	}()
	d.adminStop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = d.admin.Shutdown(sctx)
		<-served
	}
	paths := "/healthz /livez /readyz /metrics"
	if d.console != nil {
		paths += " /ui/"
	}
	log.Info("admin endpoints", "addr", d.adminAddr, "paths", paths)
	return nil
}

func (r *daemonRun) stopAdmin() {
	if r.d.adminStop != nil {
		r.d.adminStop()
	}
}

// buildWorker makes the worker, and beside it the reconciler and the
// janitor, which start next.
func (r *daemonRun) buildWorker() (startstop.Service, error) {
	c, d := r.c, r.d
	deps := worker.Deps{
		Store: d.store, JS: r.js, NC: r.nc, Consumer: r.cons,
		Decoder: &operation.Decoder{Env: c.Env, Registry: r.opTypes},
		// Redact left nil: the worker's own redaction, done as each
		// result is written, lets it keep results by business status.
		Adapters: r.routes, Log: r.log, Metrics: r.metrics, Answers: c.Reconciler.Thresholds(),
	}
	if c.Approvals.Enabled {
		policy, err := c.Approvals.policy(r.opTypes)
		if err != nil {
			return nil, configError(err)
		}
		tokens, err := c.Approvals.tokenVerifier()
		if err != nil {
			return nil, configError(err)
		}
		deps.Approvals = &worker.Approvals{Policy: policy, URL: c.approvalLinks(), NATS: c.NATS.Config, Tokens: tokens, Notify: r.notifyCons != nil}
	}
	w, err := worker.New(c.Worker, c.NATS.Config, deps)
	if err != nil {
		return nil, configError(err)
	}
	rec, err := worker.NewReconciler(c.Reconciler, c.Worker, deps)
	if err != nil {
		return nil, configError(err)
	}
	jan, err := worker.NewJanitor(worker.JanitorConfig{Retention: c.Journal.Retention, ByType: c.Journal.RetentionByType, Types: r.opTypes.Names()}, d.store, r.log)
	if err != nil {
		return nil, configError(err)
	}
	d.worker, d.reconciler, d.janitor = w, rec, jan
	return w, nil
}

// buildNotifier makes the approval notifier when approvals.notify is set.
func (r *daemonRun) buildNotifier() (startstop.Service, error) {
	if r.notifyCons == nil {
		return nil, nil
	}
	n, _, err := r.c.Approvals.Notify.notifier(os.Getenv)
	if err != nil {
		return nil, configError(err)
	}
	return worker.NewNotifier(n, r.notifyCons, r.log, r.metrics), nil
}

// buildApprovalSweeper makes the approval sweeper when approvals are on.
func (r *daemonRun) buildApprovalSweeper() (startstop.Service, error) {
	if !r.c.Approvals.Enabled {
		return nil, nil
	}
	r.d.approvals = worker.NewApprovalSweeper(worker.ApprovalSweeperConfig{Interval: r.c.Approvals.SweepInterval},
		r.d.store, r.js, r.c.NATS.Config, r.log, r.metrics)
	return r.d.approvals, nil
}

// buildIngest makes the webhook server, when ingest is enabled.
func (r *daemonRun) buildIngest() (startstop.Service, error) {
	if !r.c.Ingest.Enabled {
		return nil, nil
	}
	srv, err := ingest.New(r.c.Ingest.Config, r.js, r.log, ingest.WithRegisterer(r.d.registry), ingest.WithRegistry(r.opTypes))
	if err != nil {
		return nil, configError(err)
	}
	r.d.ingest = srv
	return srv, nil
}

func (r *daemonRun) startFaces() error {
	f, err := startFaces(r.c, r.nc, r.d.store, r.log)
	if err != nil {
		f.stop() // what it started before failing
		return err
	}
	r.d.faces = f
	return nil
}

// readyTimeout bounds one readiness check of the journal: a probe answers
// "not ready" rather than hang on a journal that does not answer.
const readyTimeout = 2 * time.Second

// journalReadiness checks that the journal answers (one round trip for its
// clock) and is migrated. Migrations are checked until they are found
// applied, then never again: they do not un-apply under a running daemon,
// and the check builds a migration provider — too much for every probe.
type journalReadiness struct {
	store    journal.Store
	pending  func(context.Context) (bool, error)
	migrated atomic.Bool
}

func newJournalReadiness(store journal.Store, pending func(context.Context) (bool, error)) *journalReadiness {
	return &journalReadiness{store: store, pending: pending}
}

// check returns why the journal is not ready, or nil.
func (r *journalReadiness) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := r.store.Now(ctx); err != nil {
		return fmt.Errorf("journal unreachable: %w", err)
	}
	if r.migrated.Load() {
		return nil
	}
	p, err := r.pending(ctx)
	if err != nil {
		return fmt.Errorf("journal migrations unknown: %w", err)
	}
	if p {
		return errors.New("journal migrations pending (idemgate migrate up)")
	}
	r.migrated.Store(true)
	return nil
}

// adminHandler serves liveness (the process only), readiness (NATS
// connected, journal answering and migrated, not starting or draining) and
// metrics.
func adminHandler(d *daemon, nc *nats.Conn, journalReady *journalReadiness) http.Handler {
	mux := http.NewServeMux()
	live := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }
	mux.HandleFunc("GET /livez", live)
	mux.HandleFunc("GET /healthz", live)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		var problems []string
		if !d.ready.Load() {
			problems = append(problems, "not running (starting or draining)")
		}
		if !nc.IsConnected() {
			problems = append(problems, "nats not connected")
		}
		if err := journalReady.check(r.Context()); err != nil {
			problems = append(problems, redact.String(err.Error()))
		}
		if len(problems) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, p := range problems {
				_, _ = io.WriteString(w, p+"\n")
			}
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	if d.console != nil {
		mux.Handle("/ui/", d.console) // the operator console (console.enabled)
	}
	return mux
}
