package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/cmd/idemgate/internal/demo"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/process/coordinator"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
)

// demoOptions are the flags of `idemgate demo`.
type demoOptions struct {
	timeout    time.Duration
	keep       bool
	verbose    bool
	only       []string
	journalURL string
	dataDir    string
}

func demoCmd(stdout, stderr io.Writer) *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show the guarantees on this machine: embedded NATS, SQLite journal, target sandboxes and a scripted agent",
		Long: `demo starts everything in this process — an embedded JetStream server, the
SQLite journal (or PostgreSQL with --journal-url), the 1C, Bitrix24 and
YooKassa sandboxes and the daemon — on free loopback ports, then plays an
agent: an invoice, CRM tasks and payments, with duplicates, retries, a lost
response, a payload conflict, two replicas racing and faults from the
targets. It counts the effects in the sandboxes' ledgers and ends with a
table of guarantees; the exit code is non-zero if any failed.

It never reads the configuration file: nothing it does reaches a real target.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.journalURL, _ = cmd.Flags().GetString("journal-url")
			o.dataDir, _ = cmd.Flags().GetString("data-dir")
			return runDemo(cmd.Context(), o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound on the whole demo")
	f.BoolVar(&o.keep, "keep-data", false, "keep the temporary data folder (journal, NATS store, daemon log) after a passing run")
	f.BoolVar(&o.verbose, "verbose", false, "write the daemon's logs to stderr instead of the data folder's idemgate.log")
	f.StringSliceVar(&o.only, "scenario", nil, "run only these scenarios ("+strings.Join(demo.IDs(), ", ")+")")
	return cmd
}

// runDemo runs the demo and turns a failed guarantee into exit code 1.
func runDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) error {
	if o.timeout <= 0 {
		return &exitError{code: exitUsage, err: errors.New("--timeout must be positive")}
	}
	for _, id := range o.only {
		if !slices.Contains(demo.IDs(), id) {
			return &exitError{code: exitUsage, err: fmt.Errorf("--scenario %q: one of %s", id, strings.Join(demo.IDs(), ", "))}
		}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the demo did not finish within --timeout %v", o.timeout))
	defer cancel()

	sys, err := startDemo(ctx, demoSetup{dataDir: o.dataDir, journalURL: o.journalURL, keep: o.keep, logTo: logTarget(o.verbose, stderr)})
	if err != nil {
		return err
	}
	sys.writeHeader(stdout)
	rep, runErr := demo.Run(sys.ctx, sys.runtime(), demo.Options{Out: stdout, Terminal: isTerminal(stdout), Only: o.only})
	// A failed run keeps its data folder for inspection.
	sys.failed = runErr != nil || !rep.Pass()
	if runErr != nil && rep.Rows == nil {
		return errors.Join(runErr, sys.close())
	}
	fmt.Fprintln(stdout)
	werr := rep.WriteTable(stdout)
	if sys.keptData() {
		fmt.Fprintf(stdout, "Data kept in %s (journal, NATS store, daemon log).\n", sys.dataDir)
	}
	return errors.Join(demoExit(rep, runErr), werr, sys.close())
}

// demoExit turns the demo's report into the command's outcome: any failed
// guarantee (or a run cut short) is exit code 1.
func demoExit(rep demo.Report, runErr error) error {
	switch {
	case runErr != nil:
		return &exitError{code: exitFailure, err: runErr}
	case !rep.Pass():
		failed := rep.Failed()
		if len(failed) == 0 {
			failed = []string{"no scenario ran"}
		}
		return &exitError{code: exitFailure, err: fmt.Errorf("%d guarantee(s) failed: %s", len(failed), strings.Join(failed, "; "))}
	}
	return nil
}

// isTerminal reports whether w is a terminal (for the spinner).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// logTarget is where the daemon logs: stderr with --verbose, else a file in
// the data folder (nil here).
func logTarget(verbose bool, stderr io.Writer) io.Writer {
	if verbose {
		return stderr
	}
	return nil
}

// demoSetup says how to start the demo's system.
type demoSetup struct {
	dataDir    string // "" = a temporary folder, removed on close unless keep or a failure
	journalURL string // "" = SQLite in dataDir
	keep       bool
	logTo      io.Writer // nil = dataDir/idemgate.log
	// tune, when set, adjusts the configuration before it is validated
	// (benchmarks).
	tune func(*Config)
}

// demoSystem is everything `idemgate demo` runs in one process.
type demoSystem struct {
	ctx     context.Context // ends when the demo's context ends or replica 1 stops
	cancel  context.CancelCauseFunc
	cfg     Config
	dataDir string
	tempDir bool
	keep    bool
	failed  bool
	logFile *os.File
	log     *slog.Logger
	sb      *demo.Sandboxes
	store   journal.Store
	first   *replica

	mu     sync.Mutex
	others []*replica
	// stops are the armed coordinator stops, by process key (stopAt).
	stops map[string]coordinatorStop
}

// coordinatorStop is an armed stop of one process's coordinator run: once
// step has settled, the run stops dead and done is closed.
type coordinatorStop struct {
	step string
	done chan struct{}
}

// stopAt arms a one-shot stop of the coordinator's run of processKey once
// step's outcome is settled (demo.Runtime.StopCoordinatorAt).
func (s *demoSystem) stopAt(processKey, step string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stops == nil {
		s.stops = map[string]coordinatorStop{}
	}
	st := coordinatorStop{step: step, done: make(chan struct{})}
	s.stops[processKey] = st
	return st.done
}

// atBoundary is the daemons' coordinator hook: true once, for an armed
// stop's process at its step's settled boundary.
func (s *demoSystem) atBoundary(b coordinator.Boundary, processKey, step string) bool {
	if b != coordinator.StepSettled {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stops[processKey]
	if !ok || st.step != step {
		return false
	}
	delete(s.stops, processKey)
	close(st.done)
	return true
}

// replica is one in-process daemon.
type replica struct {
	owner     string
	adminAddr string
	natsAddr  string // the embedded NATS server's, replica 1 only
	cancel    context.CancelFunc
	done      chan error
	once      sync.Once
	err       error
}

func (r *replica) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}

// startDemo starts the sandboxes, the embedded NATS and journal, replica 1
// and a journal reader. On error nothing is left running.
func startDemo(ctx context.Context, set demoSetup) (_ *demoSystem, err error) {
	sys := &demoSystem{dataDir: set.dataDir, keep: set.keep}
	sys.ctx, sys.cancel = context.WithCancelCause(ctx)
	defer func() {
		if err != nil {
			err = errors.Join(err, sys.close())
		}
	}()
	if sys.dataDir == "" {
		d, err := os.MkdirTemp("", "idemgate-demo-")
		if err != nil {
			return sys, fmt.Errorf("temporary data folder: %w", err)
		}
		sys.dataDir, sys.tempDir = d, true
	}
	logTo := set.logTo
	if logTo == nil {
		if err := os.MkdirAll(sys.dataDir, 0o700); err != nil {
			return sys, fmt.Errorf("data folder: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(sys.dataDir, "idemgate.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return sys, fmt.Errorf("daemon log: %w", err)
		}
		sys.logFile, logTo = f, f
	}
	sys.sb, err = demo.StartSandboxes(sandbox.Options{})
	if err != nil {
		return sys, err
	}
	sys.cfg = demoConfig(sys.dataDir, set.journalURL, sys.sb)
	sys.cfg.atBoundary = sys.atBoundary
	if set.tune != nil {
		set.tune(&sys.cfg)
	}
	if err := sys.cfg.validate(); err != nil {
		return sys, configError(err)
	}
	sys.log = newLogger(sys.cfg, logTo)
	sys.first, err = sys.startReplica(sys.cfg)
	if err != nil {
		return sys, err
	}
	if sys.first.natsAddr != "" {
		// The port the embedded server took: other replicas and the
		// scripted agent connect there.
		sys.cfg.NATS.EmbeddedAddr = sys.first.natsAddr
	}
	// The demo reads attempts from the same journal, through its own handle.
	sys.store, _, err = openJournal(sys.ctx, sys.cfg, quietLog(), readJournal)
	if err != nil {
		return sys, fmt.Errorf("journal reader: %w", err)
	}
	return sys, nil
}

// demoConfig is the daemon's configuration in the demo: embedded NATS on a
// port it takes at start (so that the demo never collides with a daemon on
// 4223), the journal, short leases so that waits stay short, and the
// sandboxes as targets.
func demoConfig(dataDir, journalURL string, sb *demo.Sandboxes) Config {
	c := defaults()
	c.Env = "demo"
	c.DataDir = dataDir
	c.Log.Level = "info"
	c.Admin.Addr = "127.0.0.1:0"
	c.NATS.EmbeddedAddr = "127.0.0.1:0"
	c.NATS.FetchWait = 50 * time.Millisecond
	// Small fetches so that two replicas share a burst between them.
	c.NATS.FetchBatch = 4
	c.Journal.URL = journalURL
	c.Worker.Owner = "demo-replica-1"
	c.Worker.LeaseTTL = 5 * time.Second
	c.Worker.HeartbeatInterval = time.Second
	c.Worker.CallTimeout = 3 * time.Second
	c.Worker.ShutdownTimeout = 5 * time.Second
	c.Worker.Retry.InLease = 6 * time.Second
	// A command whose holder died comes back after 12 s, and a process
	// whose coordinator died is taken over once its 5 s lease has run out
	// (the scenario "a coordinator stopped dead mid-checkout").
	c.NATS.AckWait = 12 * time.Second
	c.Coordinator.LeaseTTL = 5 * time.Second
	shop, secret := sb.YooKassa.Credentials()
	user, password := sb.OneC.Credentials()
	uid, code := sb.Bitrix24.Credentials()
	c.Adapters.YooKassa = &yookassa.Config{BaseURL: sb.YooKassa.URL(), ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}}
	c.Adapters.OneC = &onec.Config{BaseURL: sb.OneC.BaseURL(), User: user, Password: adapters.Password{Value: redact.Secret(password)}}
	c.Adapters.Bitrix24 = &bitrix24.Config{PortalURL: sb.Bitrix24.URL(), UserID: uid, WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)}}
	c.Routes = map[string]string{
		operation.TypePaymentCharge: yookassa.DefaultName,
		operation.TypePaymentRefund: yookassa.DefaultName,
		operation.TypeInvoiceCreate: onec.DefaultName,
		operation.TypeTaskCreate:    bitrix24.DefaultName,
		operation.TypeDealCreate:    bitrix24.DefaultName,
		operation.TypeInvoiceCancel: onec.DefaultName,
	}
	c.Processes = map[string]process.Decl{demo.CheckoutProcess: demoCheckout()}
	// Money above 50,000.00 RUB waits for a person (the scenario "a
	// charge waits for a person"); the other scenarios' amounts are below.
	above := map[string]int64{"RUB": demoApprovalAbove}
	c.Approvals.Types = map[string]operation.ApprovalRule{
		operation.TypePaymentCharge: {Mode: operation.ApprovalAbove, Above: above},
		operation.TypePaymentRefund: {Mode: operation.ApprovalAbove, Above: above},
	}
	return c
}

// demoCheckout is the demo's business process: an invoice in 1C, a charge
// in YooKassa and a shipping task in Bitrix24; a refused step compensates
// the ones before it (the invoice cancelled, the charge refunded), newest
// first.
func demoCheckout() process.Decl {
	in := func(f string) string { return "${input." + f + "}" }
	return process.Decl{
		Input: process.InputDecl{Fields: []operation.FieldDecl{
			{Name: "order_id", Kind: "string", Required: true},
			{Name: "customer_id", Kind: "string", Required: true},
			{Name: "account_id", Kind: "string", Required: true},
			{Name: "amount_minor", Kind: "money", Required: true},
			{Name: "currency", Kind: "currency", Required: true},
			{Name: "responsible_id", Kind: "string", Required: true},
		}},
		Steps: []process.StepDecl{
			{Name: "invoice", ActionDecl: process.ActionDecl{Operation: operation.TypeInvoiceCreate, Payload: map[string]any{
				"order_id": in("order_id"), "customer_id": in("customer_id"), "amount_minor": in("amount_minor"), "currency": in("currency"),
			}}, Compensate: &process.ActionDecl{Operation: operation.TypeInvoiceCancel, Payload: map[string]any{
				"invoice_id": "${steps.invoice.target_object_id}", "order_id": in("order_id"), "reason": "checkout compensated",
			}}},
			{Name: "charge", ActionDecl: process.ActionDecl{Operation: operation.TypePaymentCharge, Payload: map[string]any{
				"account_id": in("account_id"), "order_id": in("order_id"), "amount_minor": in("amount_minor"), "currency": in("currency"),
			}}, Compensate: &process.ActionDecl{Operation: operation.TypePaymentRefund, Payload: map[string]any{
				"payment_id": "${steps.charge.target_object_id}", "order_id": in("order_id"), "amount_minor": in("amount_minor"), "currency": in("currency"),
			}}},
			{Name: "shipping", ActionDecl: process.ActionDecl{Operation: operation.TypeTaskCreate, Payload: map[string]any{
				"title": "Ship order ${input.order_id}", "responsible_id": in("responsible_id"), "customer_id": in("customer_id"),
			}}},
		},
	}
}

// demoApprovalAbove is the demo's approval threshold in kopecks.
const demoApprovalAbove = 5_000_000

// startReplica runs a daemon with c until the demo ends or it is stopped.
func (s *demoSystem) startReplica(c Config) (*replica, error) {
	ctx, cancel := context.WithCancel(s.ctx)
	r := &replica{owner: c.Worker.Owner, cancel: cancel, done: make(chan error, 1)}
	started := make(chan *daemon, 1)
	first := s.first == nil
	go func() {
		err := runDaemon(ctx, c, s.log.With("replica", c.Worker.Owner), func(d *daemon) { started <- d })
		if first && s.ctx.Err() == nil {
			s.cancel(fmt.Errorf("replica %s stopped: %w", c.Worker.Owner, errors.Join(err, errors.New("see the daemon log"))))
		}
		r.done <- err
	}()
	select {
	case d := <-started:
		r.adminAddr, r.natsAddr = d.adminAddr, d.natsAddr
		return r, nil
	case err := <-r.done:
		r.done <- err
		cancel()
		if err == nil {
			err = context.Cause(s.ctx)
		}
		return nil, fmt.Errorf("replica %s did not start: %w", c.Worker.Owner, err)
	case <-s.ctx.Done():
		cancel()
		<-r.done
		return nil, fmt.Errorf("replica %s did not start: %w", c.Worker.Owner, context.Cause(s.ctx))
	}
}

// natsURL reaches the embedded server replica 1 runs.
func (s *demoSystem) natsURL() string { return "nats://" + s.cfg.NATS.EmbeddedAddr }

func (s *demoSystem) multiMachine() bool { return s.cfg.Journal.URL != "" }

func (s *demoSystem) runtime() demo.Runtime {
	kind := "SQLite " + sqlitePath(s.dataDir)
	if s.multiMachine() {
		kind = "PostgreSQL"
	}
	return demo.Runtime{
		Env: s.cfg.Env, NATSURL: s.natsURL(), Journal: s.store,
		JournalKind: kind, NATSKind: "embedded JetStream " + s.cfg.NATS.EmbeddedAddr,
		MultiMachine: s.multiMachine(), Sandboxes: s.sb, Routes: s.cfg.Routes,
		StartReplica: s.startOther,
		Approve:      s.approve, ApprovalAbove: demoApprovalAbove,
		StopCoordinatorAt: s.stopAt,
	}
}

// approve records a person's approval, as `idemgate approve` does.
func (s *demoSystem) approve(ctx context.Context, key, who, reason string) error {
	reg, err := s.cfg.registry()
	if err != nil {
		return err
	}
	policy, err := s.cfg.Approvals.policy(reg)
	if err != nil {
		return err
	}
	svc := &approval.Service{Store: s.store, Policy: policy, Approvers: s.cfg.Approvals.Approvers}
	_, err = svc.Decide(ctx, who, key, journal.VoteApprove, reason)
	return err
}

// startOther starts another replica sharing the journal and the durable
// consumer, connected to replica 1's embedded NATS.
func (s *demoSystem) startOther(_ context.Context, owner string) (func() error, error) {
	c := s.cfg
	c.NATS.URL = s.natsURL()
	c.Admin.Addr = ""
	c.Worker.Owner = owner
	r, err := s.startReplica(c)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.others = append(s.others, r)
	s.mu.Unlock()
	return r.stop, nil
}

func (s *demoSystem) writeHeader(w io.Writer) {
	fmt.Fprintln(w, "idemgate demo: one business intent, at most one business effect")
	where := s.dataDir
	if s.tempDir && !s.keep {
		where += " (temporary, removed at the end; --keep-data keeps it)"
	}
	fmt.Fprintf(w, "  data       %s\n", where)
	fmt.Fprintf(w, "  NATS       embedded JetStream on %s\n", s.cfg.NATS.EmbeddedAddr)
	if s.multiMachine() {
		fmt.Fprintln(w, "  journal    PostgreSQL (--journal-url)")
	} else {
		fmt.Fprintf(w, "  journal    SQLite %s\n", sqlitePath(s.dataDir))
	}
	fmt.Fprintf(w, "  daemon     %s, admin http://%s/metrics\n", s.first.owner, s.first.adminAddr)
	if s.logFile != nil {
		fmt.Fprintf(w, "  daemon log %s\n", s.logFile.Name())
	}
	for _, t := range s.sb.Targets() {
		fmt.Fprintf(w, "  sandbox    %-9s %s  (ledger: %s/_sandbox/ledger)\n", t.Name(), t.URL(), t.URL())
	}
}

// keptData reports whether the data folder stays after close.
func (s *demoSystem) keptData() bool { return !s.tempDir || s.keep || s.failed }

// close stops the replicas, the journal reader and the sandboxes, and
// removes a temporary data folder unless it is kept.
func (s *demoSystem) close() error {
	var errs []error
	s.mu.Lock()
	others := s.others
	s.others = nil
	s.mu.Unlock()
	for _, r := range append(others, s.first) {
		if r == nil {
			continue
		}
		if err := r.stop(); err != nil {
			errs = append(errs, fmt.Errorf("replica %s: %w", r.owner, err))
		}
	}
	s.cancel(errors.New("demo closed"))
	if s.store != nil {
		s.store.Close()
	}
	if s.sb != nil {
		// An emulator's graceful shutdown waits for keep-alive connections
		// the adapters dialled but never used; past its deadline it closes
		// them anyway, so that is no failure of the demo.
		if err := s.sb.Close(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, fmt.Errorf("sandboxes: %w", err))
		} else if err != nil && s.log != nil {
			s.log.Warn("sandboxes closed forcibly after their shutdown deadline", "error", err.Error())
		}
	}
	if s.logFile != nil {
		errs = append(errs, s.logFile.Close())
	}
	err := errors.Join(errs...)
	if s.tempDir && !s.keptData() {
		if rerr := os.RemoveAll(s.dataDir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", s.dataDir, rerr))
		}
	}
	return err
}
