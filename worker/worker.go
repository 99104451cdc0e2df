package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// Deps are what the worker works with.
type Deps struct {
	Store    journal.Store
	JS       consumer.JetStream
	NC       *consumer.Conn
	Consumer consumer.Pull
	Decoder  *operation.Decoder
	// Adapters by operation type.
	Adapters map[string]adapters.Adapter
	Log      *slog.Logger
	Metrics  *Metrics
	// Redact cleans normalised results before they are stored or published.
	// Default (nil): the rules of redact.JSON, applied while the result is
	// written, and results without details kept by business status; a
	// function set here gets every encoded result and defeats both.
	Redact func(json.RawMessage) json.RawMessage
	// Approvals gates intents by the approval policy (approval.go); nil:
	// no intent waits for a person.
	Approvals *Approvals
	// Answers are the thresholds the published results are worded by
	// (review_after, idle_after): the reconciler's configuration. Zero
	// fields take answer's defaults.
	Answers answer.Thresholds
}

// Worker decides what becomes of each command its consumer.Router fetches:
// claim → decide → call → complete, then hands the result back to the
// Delivery, which publishes it and acks.
type Worker struct {
	cfg   Config
	ncfg  consumer.Config
	d     Deps
	rules map[string]classifier // by adapter name
	log   *slog.Logger
	m     *Metrics

	router *consumer.Router
	commit *committer
	// executing counts the execute loops running (execute): none, and a
	// completion's group commit has nothing to wait for.
	executing atomic.Int64
	beats     *heartbeats
	// waiting holds copies of commands whose key a delivery here owns.
	waiting *waitingRoom
	// execs hands a call to an idle executor (goExecute).
	execs chan *job

	startstop.BaseStartStop
	work       context.Context
	cancelWork context.CancelCauseFunc

	// defaultRedact: Deps.Redact was left to redact.JSON, a pure function,
	// so outcomes without details can be kept by business status.
	defaultRedact bool
	outcomes      sync.Map // business status → json.RawMessage
	outcomesN     atomic.Int32
}

// ErrShutdown is the cause of contexts cancelled by Stop past its timeout.
var ErrShutdown = errors.New("worker: shut down")

// New builds a worker. ncfg must be the configuration the consumer was
// ensured with.
func New(cfg Config, ncfg consumer.Config, d Deps) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ValidateHorizons(cfg, ncfg); err != nil {
		return nil, err
	}
	if d.Store == nil || d.JS == nil || d.Consumer == nil || d.Decoder == nil {
		return nil, errors.New("worker: store, JetStream, consumer and decoder are required")
	}
	rules, err := adapterRules(cfg, d.Adapters)
	if err != nil {
		return nil, err
	}
	defaultRedact := d.Redact == nil
	fillDeps(&d)
	w := &Worker{
		cfg: cfg, ncfg: ncfg, d: d, rules: rules, log: d.Log, m: d.Metrics, defaultRedact: defaultRedact,
		execs: make(chan *job),
	}
	w.router = consumer.NewRouter(ncfg, consumer.RouterConfig{MaxInFlight: cfg.MaxInFlight, Handlers: cfg.Claimers,
		PendingEvery: cfg.HeartbeatInterval}, d.Consumer, d.JS, d.NC, d.Log, d.Metrics.routerHooks())
	held := w.router.OldestHeld
	d.Metrics.heldFor.Store(&held)
	return w, nil
}

// adapterRules compiles the effective rules of every routed adapter.
func adapterRules(cfg Config, routes map[string]adapters.Adapter) (map[string]classifier, error) {
	out := map[string]classifier{}
	for _, a := range routes {
		if _, done := out[a.Name()]; done {
			continue
		}
		c, err := rulesFor(cfg.Rules, cfg.RulesByAdapter, a)
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		out[a.Name()] = c
	}
	for name := range cfg.RulesByAdapter {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("worker.rules_by_adapter.%s: no routed adapter is named %q", name, name)
		}
	}
	return out, nil
}

// Owner returns the worker's lease owner name.
func (w *Worker) Owner() string { return w.cfg.Owner }

// Start begins fetching and processing. It returns at once; the worker runs
// until Stop or until ctx ends, then drains (see Stop).
func (w *Worker) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := w.StartInit(ctx)
	if !shouldStart {
		return fmt.Errorf("worker: %w", startstop.ErrAlreadyStarted)
	}
	w.work, w.cancelWork = context.WithCancelCause(context.WithoutCancel(ctx))
	w.commit = newCommitter(w.d.Store, w.cfg.CompleteWindow, w.cfg.CompleteBatch, w.cfg.Committers, w.m,
		func() bool { return w.executing.Load() == 0 })
	w.beats = newHeartbeats(w)
	w.waiting = newWaitingRoom(w.cfg.MaxInFlight)
	go w.beats.loop()
	w.router.Start(ctx, w.handleBatch)
	go func() {
		started()
		defer stopped()
		<-ctx.Done()
		w.drain()
	}()
	return nil
}

// Stop stops fetching, lets in-flight work finish up to ShutdownTimeout, then
// cancels what remains. Nothing unpublished is ever acknowledged: unfinished
// commands are redelivered and their leases expire into reconciliation.
// Safe to call twice, and before Start.
func (w *Worker) Stop() { w.BaseStartStop.Stop() }

// drain is Stop's work, once the worker's context has ended.
func (w *Worker) drain() {
	w.router.StopFetching()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
	if err := w.router.Drain(ctx); err != nil {
		w.log.Warn("shutdown timeout: cancelling in-flight operations", "timeout", w.cfg.ShutdownTimeout.String())
		w.cancelWork(ErrShutdown)
		_ = w.router.Drain(context.Background())
	}
	cancel()
	w.cancelWork(ErrShutdown)
	w.beats.stop()
	w.commit.close()
	w.router.Close() // every command is settled: nothing publishes any more
}

// job is one command in flight.
type job struct {
	d     *consumer.Delivery
	op    operation.Operation
	claim journal.Claim
	// claimedAt is when claim came back, on this process's monotonic clock:
	// the operation's age now is claim.Age() plus the time since.
	claimedAt time.Time
	// claimSent is when the claim was sent (this process's clock).
	claimSent time.Time
	// owns: a delivery of the job owns its key in the waiting room (own,
	// disown); hooked: its settle already disowns. Both under the room's
	// lock.
	owns, hooked bool
	// waitUntil ends the job's waits for an owner of its key (waitBound
	// after its first); zero before it first waited.
	waitUntil time.Time
	// leaseBy is when the claim's lease ends at the earliest, on this
	// process's monotonic clock: the time the claim was sent plus the
	// lease the database granted (zero without a lease). A process stopped
	// between the claim and the call (SIGSTOP, a stall) sees it passed.
	leaseBy time.Time
}

// setClaim records a claim sent at sent (this process's clock).
func (j *job) setClaim(c journal.Claim, sent time.Time) {
	j.claim, j.claimSent, j.claimedAt, j.leaseBy = c, sent, time.Now(), time.Time{}
	if c.Owns() && !c.Record.LeaseUntil.IsZero() && !c.Now.IsZero() {
		j.leaseBy = sent.Add(c.Record.LeaseUntil.Sub(c.Now))
	}
}

// age is how long ago the operation's first attempt began, on the
// database clock as of the claim.
func (j *job) age() time.Duration { return j.claim.Age() + time.Since(j.claimedAt) }

// deliveries is how often JetStream has delivered the command (0 when its
// metadata cannot be read); parsed only on the paths that need it.
func (j *job) deliveries() uint64 { return j.d.Deliveries() }

// handleBatch decodes a fetched batch, claims it in one round trip and acts
// on each decision.
func (w *Worker) handleBatch(ds []*consumer.Delivery) {
	jobs := make([]*job, 0, len(ds))
	reqs := make([]journal.ClaimRequest, 0, len(ds))
	for _, d := range ds {
		j := &job{d: d}
		op, err := w.decode(d)
		if errors.Is(err, errNoRoute) {
			w.m.unrouted.Inc()
			w.log.Error("no adapter for this operation: the command stays in JetStream until a replica can serve it (see routes: in the config)",
				"operation", op.Type, "operation_key", op.Key.String(), "event_id", op.EventID)
			j.op = op
			w.nak(j, time.Minute)
			continue
		}
		if err != nil {
			w.reject(j, err)
			continue
		}
		op.ReplyTo = d.ReplyTo()
		j.op = op
		j.traceDecoded(op)
		if !w.gate(j) {
			continue
		}
		jobs = append(jobs, j)
		reqs = append(reqs, w.claimRequest(op))
	}
	if len(jobs) == 0 {
		return
	}
	w.claimBatch(jobs, reqs)
}

// claimBatch claims jobs (reqs in the same order) in one round trip and
// acts on each decision.
func (w *Worker) claimBatch(jobs []*job, reqs []journal.ClaimRequest) {
	sent := time.Now() // the lease is measured from before the claim went out
	claimSpan := startClaimSpan(jobs)
	claims, err := w.d.Store.Claim(w.work, reqs)
	endClaimSpan(claimSpan, err)
	w.m.batch(batchClaim, len(reqs), time.Since(sent))
	if err != nil {
		w.log.Error("claim failed: commands will be redelivered", "error", err.Error(), "batch", len(jobs))
		for _, j := range jobs {
			w.nak(j, w.cfg.Retry.NextRetry(int(j.deliveries())))
		}
		return
	}
	for i, j := range jobs {
		j.setClaim(claims[i], sent)
		w.dispatch(j)
	}
}

// claimRequest is this worker's claim of an operation.
func (w *Worker) claimRequest(op operation.Operation) journal.ClaimRequest {
	return journal.ClaimRequest{
		Key: op.Key.String(), OperationType: op.Type, RequestHash: op.Fingerprint,
		TargetSystem: op.TargetSystem, EventID: op.EventID, ApprovalID: op.ApprovalID,
		Owner: w.cfg.Owner, LeaseTTL: w.cfg.LeaseTTL, FieldDigests: op.FieldDigests(),
	}
}

// decode validates a command message; the subject must name the envelope's
// operation.
func (w *Worker) decode(d *consumer.Delivery) (operation.Operation, error) {
	op, err := w.d.Decoder.Decode(d.Data())
	if err != nil {
		return op, err
	}
	subjOp, ok := d.Operation()
	if !ok || subjOp != op.Type {
		return op, &operation.DecodeError{Code: operation.CodeKeyMismatch, Field: "operation",
			Msg: "the subject names another operation than the envelope", Key: op.Key.String(), EventID: op.EventID, Operation: op.Type}
	}
	if _, ok := w.d.Adapters[op.Type]; !ok {
		return op, errNoRoute
	}
	return op, nil
}

// errNoRoute: a valid command for a registered operation this replica has
// no adapter for. That is a deployment error, not bad input: the command is
// left in JetStream for a replica configured for it (or this one, fixed).
var errNoRoute = errors.New("worker: no adapter is configured for this operation")

// dispatch acts on a claim decision.
func (w *Worker) dispatch(j *job) {
	c := j.claim
	j.traceDecision()
	switch c.Decision {
	case journal.Execute:
		w.m.decided(c.Decision)
		w.own(j)
		w.goExecute(j)
	case journal.Reconcile:
		w.m.decided(c.Decision)
		w.own(j)
		go w.reconcile(j)
	case journal.ReplaySucceeded, journal.ReplayFailed:
		w.m.decided(c.Decision)
		w.publishAndAck(j, w.resultFromRecord(j, c.Record, true))
	case journal.Conflict:
		w.m.decided(c.Decision)
		w.log.Warn("conflict: same key, other payload; nothing executed", "operation_key", c.Record.Key, "event_id", j.op.EventID)
		go w.publishConflict(j, c.Record)
	case journal.InProgress:
		// Another owner will publish, or a retryable failure waits out its
		// backoff: this delivery waits for a delivery of this worker that
		// owns the key (waiting.go), or comes back later, and takes no
		// attempt.
		w.m.decided(c.Decision)
		// A job that owned the key until this claim (its retry or its
		// lookup re-claimed and met another owner) gives it up first: it
		// must never wait for its own settle.
		if (!crashpoint.Broken(crashpoint.UnboundedWait) && w.disown(j)) || !w.wait(j) {
			w.publishPendingAndNak(j, w.comeBackIn(j), c.Record)
		}
	default:
		w.log.Error("unknown claim decision", "decision", string(c.Decision), "operation_key", j.op.Key.String())
		w.nak(j, time.Second)
	}
}

// Margins of a delivery's return, on top of the journal's wait.
const (
	// holdSlack brings a delivery back just after a retry's hold ends, not
	// a hair before it (which would cost a delivery for nothing).
	holdSlack = 20 * time.Millisecond
	// leaseSlack brings a delivery back just after a lease ends, to
	// reconcile a dead owner.
	leaseSlack = 100 * time.Millisecond
	// turnGrace leaves the end of a hold for a client-side rate limit's
	// turn to its owner, which holds the turn in its own bucket: a copy
	// elsewhere that claimed first would make the call from the back of
	// its replica's queue, and the turn would be lost.
	turnGrace = time.Second
)

// publishConflict answers a key reused with another payload, naming the
// fields that differ from the first request (by their stored digests, one
// read on this rare path; a read that fails names none).
func (w *Worker) publishConflict(j *job, rec journal.Record) {
	stored, err := w.d.Store.FieldDigests(w.work, rec.Key)
	if err != nil {
		w.log.Warn("conflict: the first request's field digests could not be read", "operation_key", rec.Key, "error", err.Error())
	}
	w.publishAndAck(j, conflictResult(j.op, rec, operation.ConflictFields(stored, j.op.FieldDigests())))
}

// comeBackIn is when a delivery that found its operation held comes back,
// measured from the journal's wait on the database clock: just after the
// hold of a retryable failure (the next attempt's "not before"), and a
// while after a hold for the call's turn in a client-side rate limit, whose
// owner claims the next attempt the moment it ends (turnGrace); for a live
// lease, along the retry schedule (most calls are short) but never later
// than just past the lease's end.
func (w *Worker) comeBackIn(j *job) time.Duration {
	wait := j.claim.Wait()
	if j.claim.Record.Status == journal.StatusFailedRetryable {
		if j.claim.Record.ErrorCode == adapters.CodeClientRateLimit {
			return wait + turnGrace
		}
		return wait + holdSlack
	}
	return max(min(w.cfg.Retry.NextRetry(int(j.deliveries())), wait+leaseSlack), leaseSlack)
}

func fillDeps(d *Deps) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(nil)
	}
	d.Answers = d.Answers.WithDefaults()
}
