package daemontest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/process/coordinator"
	"github.com/idemgate/idemgate/redact"
	sbbitrix24 "github.com/idemgate/idemgate/sandbox/bitrix24"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
	"github.com/idemgate/idemgate/worker"
)

// Options change what StartWith runs.
type Options struct {
	// Processes, when set, are the daemon's declared processes: the 1C
	// emulator serves invoice.create and invoice.cancel, the Bitrix24
	// emulator crm.task.create, and the processes stream and the
	// coordinators' consumer are made (StartCoordinator runs one).
	Processes map[string]process.Decl
	// ProcessAckWait is the process commands' AckWait: how soon a command
	// held by a coordinator that died comes back. Default 3s.
	ProcessAckWait time.Duration
	// Approvals gates intents by the built-in approval policy
	// (payment.charge and payment.refund wait for one approver), with the
	// parked stream and a sweeper; Daemon.Approvals decides.
	Approvals bool
	// Tokens, with Approvals, verifies pre-signed approval tokens: a
	// command carrying a good one executes at once.
	Tokens *approval.Verifier
	// Notify, with Approvals, announces each request as a signed POST
	// (the notify stream and a Notifier).
	Notify *worker.NotifierConfig
}

// gateApprovals readies the built-in approval policy for the worker.
func (d *Daemon) gateApprovals(tb testing.TB, tokens *approval.Verifier) {
	tb.Helper()
	policy, err := operation.CompileApprovalPolicy(nil, nil)
	if err != nil {
		tb.Fatalf("approval policy: %v", err)
	}
	if err := consumer.EnsureParked(context.Background(), d.JS, d.Consumer, time.Hour); err != nil {
		tb.Fatalf("parked stream: %v", err)
	}
	d.approvals = &worker.Approvals{Policy: policy, URL: func(k string) string { return "https://idemgate.example/ui/approvals/" + k }, NATS: d.Consumer, Tokens: tokens}
	d.Approvals = &approval.Service{Store: d.Journal, Policy: policy}
}

// notifyApprovals makes the notify stream and runs a notifier with cfg
// (retries 200 ms apart at most, so that tests see them).
func (d *Daemon) notifyApprovals(tb testing.TB, cfg worker.NotifierConfig) {
	tb.Helper()
	cons, err := consumer.EnsureNotify(context.Background(), d.JS, d.Consumer, 2*time.Hour, time.Hour, 5*time.Second, cfg.WithDefaults().MaxAttempts)
	if err != nil {
		tb.Fatalf("notify stream: %v", err)
	}
	d.approvals.Notify = true
	n := worker.NewNotifier(cfg, cons, nil, nil)
	if err := n.Start(context.Background()); err != nil {
		tb.Fatalf("approval notifier: %v", err)
	}
	tb.Cleanup(n.Stop)
}

// sweepApprovals runs the sweeper that carries decisions out.
func (d *Daemon) sweepApprovals(tb testing.TB) {
	tb.Helper()
	sw := worker.NewApprovalSweeper(worker.ApprovalSweeperConfig{Interval: 100 * time.Millisecond}, d.Journal, d.JS, d.Consumer, nil, nil)
	if err := sw.Start(context.Background()); err != nil {
		tb.Fatalf("approval sweeper: %v", err)
	}
	tb.Cleanup(sw.Stop)
}

// The process side of a Daemon started with Options.Processes.
type processSide struct {
	// OneC and Bitrix24 are the emulators of the processes' other steps.
	OneC     *sbonec.Server
	Bitrix24 *sbbitrix24.Server
	// Processes are the compiled declarations.
	Processes *process.Set
	// Approvals decides approvals (Options.Approvals).
	Approvals *approval.Service
	// ProcessConsumer is the processes stream's configuration (a short
	// AckWait).
	ProcessConsumer consumer.Config
	processPull     consumer.Pull
}

// startTargets starts the 1C and Bitrix24 emulators and routes the
// processes' step types to adapters for them (Run builds the worker with
// them).
func (d *Daemon) startTargets(tb testing.TB) {
	tb.Helper()
	d.OneC = sbonec.New(sbonec.Options{})
	if _, err := d.OneC.Start("127.0.0.1:0"); err != nil {
		tb.Fatalf("1C emulator: %v", err)
	}
	tb.Cleanup(func() { _ = d.OneC.Close() })
	user, pw := d.OneC.Credentials()
	oc, err := onec.New(onec.Config{BaseURL: d.OneC.BaseURL(), User: user, Password: adapters.Password{Value: redact.Secret(pw)},
		HTTPConfig: adapters.HTTPConfig{Timeout: 2 * time.Second}})
	if err != nil {
		tb.Fatalf("1C adapter: %v", err)
	}
	d.Bitrix24 = sbbitrix24.New(sbbitrix24.Options{})
	if _, err := d.Bitrix24.Start("127.0.0.1:0"); err != nil {
		tb.Fatalf("Bitrix24 emulator: %v", err)
	}
	tb.Cleanup(func() { _ = d.Bitrix24.Close() })
	uid, code := d.Bitrix24.Credentials()
	bx, err := bitrix24.New(bitrix24.Config{PortalURL: d.Bitrix24.URL(), UserID: uid, WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)},
		HTTPConfig: adapters.HTTPConfig{Timeout: 2 * time.Second}})
	if err != nil {
		tb.Fatalf("Bitrix24 adapter: %v", err)
	}
	d.targets = map[string]adapters.Adapter{
		operation.TypeInvoiceCreate: oc, operation.TypeInvoiceCancel: oc, operation.TypeTaskCreate: bx,
	}
	d.Routes = append(d.Routes, operation.TypeInvoiceCreate, operation.TypeInvoiceCancel, operation.TypeTaskCreate)
}

// prepareProcesses compiles the declarations, makes the processes stream
// and keeps the definitions in the journal.
func (d *Daemon) prepareProcesses(tb testing.TB, opts Options) {
	tb.Helper()
	set, err := process.CompileAll(Env, opts.Processes, operation.DefaultRegistry())
	if err != nil {
		tb.Fatalf("processes: %v", err)
	}
	d.Processes = set
	ack := opts.ProcessAckWait
	if ack == 0 {
		ack = 3 * time.Second
	}
	d.ProcessConsumer = d.Consumer
	d.ProcessConsumer.AckWait = ack
	ctx := context.Background()
	d.processPull, err = consumer.EnsureProcesses(ctx, d.JS, d.ProcessConsumer)
	if err != nil {
		tb.Fatalf("processes stream: %v", err)
	}
	if err := d.CheckProcesses(ctx); err != nil {
		tb.Fatalf("processes: %v", err)
	}
}

// CheckProcesses runs the coordinators' start-up check on the daemon's journal:
// the definitions kept, the running processes able to finish.
func (d *Daemon) CheckProcesses(ctx context.Context) error {
	routed := map[string]bool{}
	for _, r := range d.Routes {
		routed[r] = true
	}
	_, err := coordinator.Prepare(ctx, d.processStore(), d.Processes, operation.DefaultRegistry(), func(op string) bool { return routed[op] })
	return err
}

func (d *Daemon) processStore() coordinator.Store {
	return d.Journal.(coordinator.Store)
}

// CoordinatorConfig is the configuration StartCoordinator uses for owner:
// short leases and waits, so that a process whose coordinator died resumes
// within a test.
func CoordinatorConfig(owner string) coordinator.Config {
	return coordinator.Config{Owner: owner, LeaseTTL: time.Second, HeartbeatInterval: 300 * time.Millisecond,
		StepWait: 5 * time.Second, ComeBack: 200 * time.Millisecond, ApprovalWait: 300 * time.Millisecond, Poll: 200 * time.Millisecond,
		ShutdownTimeout: 2 * time.Second}
}

// StartCoordinator runs a process coordinator named owner on the daemon;
// atBoundary (may be nil) is its Deps.AtBoundary. It stops when the test
// ends, or at Stop.
func (d *Daemon) StartCoordinator(tb testing.TB, owner string, atBoundary func(b coordinator.Boundary, processKey, step string) bool) *coordinator.Coordinator {
	tb.Helper()
	c, err := coordinator.New(CoordinatorConfig(owner), d.ProcessConsumer, coordinator.Deps{
		Store: d.processStore(), JS: d.JS, NC: d.NC, Consumer: d.processPull, Processes: d.Processes,
		Registry: operation.DefaultRegistry(), Log: slog.New(slog.DiscardHandler), AtBoundary: atBoundary,
	})
	if err != nil {
		tb.Fatalf("coordinator: %v", err)
	}
	if err := c.Start(context.Background()); err != nil {
		tb.Fatalf("coordinator: %v", err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// Checkout is the worked example: an invoice in 1C, a charge in YooKassa,
// a shipping task in Bitrix24; the invoice is cancelled and the charge
// refunded when a later step fails. Its input: order_id, customer_id,
// account_id (the saved payment method: sandbox/yookassa.MethodDeclined is
// declined), amount_minor, currency, responsible_id (Bitrix24 refuses one
// that is not a user id, e.g. "nobody").
func Checkout() process.Decl {
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
			{Name: "invoice", ActionDecl: process.ActionDecl{Operation: "invoice.create", Payload: map[string]any{
				"order_id": "${input.order_id}", "customer_id": "${input.customer_id}",
				"amount_minor": "${input.amount_minor}", "currency": "${input.currency}",
			}}, Compensate: &process.ActionDecl{Operation: "invoice.cancel", Payload: map[string]any{
				"invoice_id": "${steps.invoice.target_object_id}", "order_id": "${input.order_id}", "reason": "checkout compensated",
			}}},
			{Name: "charge", ActionDecl: process.ActionDecl{Operation: "payment.charge", Payload: map[string]any{
				"account_id": "${input.account_id}", "order_id": "${input.order_id}",
				"amount_minor": "${input.amount_minor}", "currency": "${input.currency}",
			}}, Compensate: &process.ActionDecl{Operation: "payment.refund", Payload: map[string]any{
				"payment_id": "${steps.charge.target_object_id}", "order_id": "${input.order_id}",
				"amount_minor": "${input.amount_minor}", "currency": "${input.currency}",
			}}},
			{Name: "shipping", ActionDecl: process.ActionDecl{Operation: "crm.task.create", Payload: map[string]any{
				"title": "Ship order ${input.order_id}", "responsible_id": "${input.responsible_id}", "customer_id": "${input.customer_id}",
			}}},
		},
	}
}
