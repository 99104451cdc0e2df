package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/wire"
)

// Config tunes the worker. Zero fields take the documented defaults.
type Config struct {
	// Owner names this worker in leases and the attempts trail. Default
	// <hostname>-<pid>-<random>; it must be unique per process.
	Owner string `mapstructure:"owner"`
	// LeaseTTL is the journal lease a claim takes; heartbeats renew it while
	// a call runs. Default 30s.
	LeaseTTL time.Duration `mapstructure:"lease_ttl"`
	// CallTimeout bounds one call to a target. Default 10s.
	CallTimeout time.Duration `mapstructure:"call_timeout"`
	// HeartbeatInterval renews leases and AckWait. Default LeaseTTL/3.
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// MaxInFlight bounds commands held at once (fetched, not yet acked). Default 1000.
	MaxInFlight int `mapstructure:"max_in_flight"`
	// Claimers is how many fetched batches are claimed concurrently. Default 2.
	Claimers int `mapstructure:"claimers"`
	// CompleteWindow is the group-commit window for completions. Default 2ms.
	CompleteWindow time.Duration `mapstructure:"complete_window"`
	// CompleteBatch caps one group commit. Default 500.
	CompleteBatch int `mapstructure:"complete_batch"`
	// Committers is how many group commits may be in the journal at once;
	// while all are busy the next group keeps filling. Default 2.
	Committers int `mapstructure:"committers"`
	// ShutdownTimeout bounds the drain of in-flight work on Stop. Default 25s.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// Retry is the retry policy; Rules classify error codes for every
	// adapter. Default DefaultRules.
	Retry RetryPolicy `mapstructure:"retry"`
	Rules Rules       `mapstructure:"rules"`
	// RulesByAdapter refines Rules for one adapter instance (by its name, as
	// routes name it): a code listed here takes this class for that target,
	// every other code keeps its global class.
	RulesByAdapter map[string]Rules `mapstructure:"rules_by_adapter"`
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), strconv.FormatInt(time.Now().UnixNano()%1e6, 36))
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 10 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.LeaseTTL / 3
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 1000
	}
	if c.Claimers == 0 {
		c.Claimers = 2
	}
	if c.CompleteWindow == 0 {
		c.CompleteWindow = 2 * time.Millisecond
	}
	if c.CompleteBatch == 0 {
		c.CompleteBatch = 500
	}
	if c.Committers == 0 {
		c.Committers = 2
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 25 * time.Second
	}
	if c.Rules.empty() {
		c.Rules = DefaultRules()
	}
	c.Retry = c.Retry.WithDefaults()
	return c
}

// Validate checks the configuration on its own; ValidateHorizons checks it
// against the consumer's.
func (c Config) Validate() error {
	var errs []error
	if c.CallTimeout <= 0 || c.LeaseTTL <= 0 {
		errs = append(errs, errors.New("worker.call_timeout and worker.lease_ttl must be positive"))
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.LeaseTTL {
		errs = append(errs, fmt.Errorf("worker.heartbeat_interval %v: must be positive and below lease_ttl %v", c.HeartbeatInterval, c.LeaseTTL))
	}
	if c.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("worker.max_in_flight %d: at least 1", c.MaxInFlight))
	}
	if c.Claimers < 1 || c.Committers < 1 || c.CompleteBatch < 1 || c.CompleteWindow <= 0 {
		errs = append(errs, errors.New("worker.claimers, committers, complete_batch and complete_window must be positive"))
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Rules.compile(); err != nil {
		errs = append(errs, err)
	}
	for name, r := range c.RulesByAdapter {
		if _, err := r.compile(); err != nil {
			errs = append(errs, fmt.Errorf("rules_by_adapter.%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// ValidateHorizons refuses unsafe combinations of timeouts: a call must end
// inside its lease, and a lease (with one missed heartbeat of slack) inside
// the AckWait, or JetStream would redeliver a command whose owner still works.
func ValidateHorizons(w Config, c consumer.Config) error {
	var errs []error
	if w.CallTimeout >= w.LeaseTTL {
		errs = append(errs, fmt.Errorf("unsafe: worker.call_timeout %v must be below worker.lease_ttl %v", w.CallTimeout, w.LeaseTTL))
	}
	if w.LeaseTTL+w.HeartbeatInterval >= c.AckWait {
		errs = append(errs, fmt.Errorf("unsafe: worker.lease_ttl %v plus one heartbeat_interval %v must be below nats.ack_wait %v",
			w.LeaseTTL, w.HeartbeatInterval, c.AckWait))
	}
	if w.Retry.InLease+w.CallTimeout >= c.AckWait {
		errs = append(errs, fmt.Errorf("unsafe: worker.retry.in_lease %v plus call_timeout %v must be below nats.ack_wait %v",
			w.Retry.InLease, w.CallTimeout, c.AckWait))
	}
	if c.CommandsMaxAge > 0 && w.Retry.MaxElapsed >= c.CommandsMaxAge {
		errs = append(errs, fmt.Errorf("unsafe: worker.retry.max_elapsed %v must be below nats.commands_max_age %v: "+
			"a command that leaves the stream cannot come back for its retries", w.Retry.MaxElapsed, c.CommandsMaxAge))
	}
	return errors.Join(errs...)
}

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
	beats  *heartbeats

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
	}
	w.router = consumer.NewRouter(ncfg, consumer.RouterConfig{MaxInFlight: cfg.MaxInFlight, Handlers: cfg.Claimers,
		PendingEvery: cfg.HeartbeatInterval}, d.Consumer, d.JS, d.NC, d.Log, d.Metrics.routerHooks())
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
	w.commit = newCommitter(w.d.Store, w.cfg.CompleteWindow, w.cfg.CompleteBatch, w.cfg.Committers, w.m)
	w.beats = newHeartbeats(w)
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
	// leaseBy is when the claim's lease ends at the earliest, on this
	// process's monotonic clock: the time the claim was sent plus the
	// lease the database granted (zero without a lease). A process stopped
	// between the claim and the call (SIGSTOP, a stall) sees it passed.
	leaseBy time.Time
}

// setClaim records a claim sent at sent (this process's clock).
func (j *job) setClaim(c journal.Claim, sent time.Time) {
	j.claim, j.claimedAt, j.leaseBy = c, time.Now(), time.Time{}
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
		jobs = append(jobs, j)
		reqs = append(reqs, w.claimRequest(op))
	}
	if len(jobs) == 0 {
		return
	}
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
		go w.execute(j)
	case journal.Reconcile:
		w.m.decided(c.Decision)
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
		// backoff: this delivery comes back later and takes no attempt.
		w.m.decided(c.Decision)
		w.publishPendingAndNak(j, w.comeBackIn(j), c.Record.AttemptCount)
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
)

// publishConflict answers a key reused with another payload, naming the
// fields that differ from the first request (by their stored digests, one
// read on this rare path; a read that fails names none).
func (w *Worker) publishConflict(j *job, rec journal.Record) {
	stored, err := w.d.Store.FieldDigests(w.work, rec.Key)
	if err != nil {
		w.log.Warn("conflict: the first request's field digests could not be read", "operation_key", rec.Key, "error", err.Error())
	}
	fields := operation.ConflictFields(stored, j.op.FieldDigests())
	reason := "the key was first used with another payload"
	if len(fields) > 0 {
		reason += ": " + strings.Join(fields, ", ") + " differ"
	}
	w.publishAndAck(j, operation.Result{
		OperationKey: rec.Key, EventID: j.op.EventID, Operation: j.op.Type,
		Status: operation.ResultConflict, TargetSystem: j.op.TargetSystem,
		ErrorCode: adapters.CodeKeyPayloadMismatch, Reason: reason,
		Attempts: rec.AttemptCount, ConflictFields: fields,
	})
}

// comeBackIn is when a delivery that found its operation held comes back,
// measured from the journal's wait on the database clock: just after the
// hold of a retryable failure (the next attempt's "not before"); for a live
// lease, along the retry schedule (most calls are short) but never later
// than just past the lease's end.
func (w *Worker) comeBackIn(j *job) time.Duration {
	wait := j.claim.Wait()
	if j.claim.Record.Status == journal.StatusFailedRetryable {
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
}

// outcomeJSON is the normalised result of an outcome. An outcome without
// details under the default redaction is the same document for the same
// business status: it is built once per status and shared (never modified).
func (w *Worker) outcomeJSON(o adapters.Outcome) json.RawMessage {
	if !w.defaultRedact || len(o.Details) > 0 {
		return outcomeJSON(w.d, o)
	}
	if b, ok := w.outcomes.Load(o.BusinessStatus); ok {
		return b.(json.RawMessage)
	}
	b := outcomeJSON(w.d, o)
	if w.outcomesN.Add(1) <= maxCachedOutcomes {
		w.outcomes.Store(o.BusinessStatus, b)
	}
	return b
}

// maxCachedOutcomes bounds the business statuses whose outcome is kept.
const maxCachedOutcomes = 64

// outcomeJSON is the normalised result kept and replayed: the business status
// and safe details, redacted, never the target's raw response. The default
// redaction (Deps.Redact nil) is done as the document is written
// (redact.AppendMember: strings are redacted, numbers checked for card
// numbers, names screened once each), with the bytes redact.JSON would make
// of the encoded document; a custom Deps.Redact gets the encoded document.
func outcomeJSON(d Deps, o adapters.Outcome) json.RawMessage {
	if d.Redact == nil {
		if b, err := appendOutcome(make([]byte, 0, 64+32*len(o.Details)), o); err == nil {
			return b
		}
		return redact.JSON(fallbackOutcome(o))
	}
	m := map[string]any{"business_status": o.BusinessStatus}
	for k, v := range o.Details {
		if k != "business_status" {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		b = fallbackOutcome(o)
	}
	return d.Redact(b)
}

// fallbackOutcome is the result of an outcome whose details do not encode.
func fallbackOutcome(o adapters.Outcome) []byte {
	return []byte(`{"business_status":` + strconv.Quote(o.BusinessStatus) + `}`)
}

// appendOutcome writes the object {"business_status": …, details…} with
// its members in name order, as encoding/json writes a map.
func appendOutcome(dst []byte, o adapters.Outcome) ([]byte, error) {
	var small [8]string
	names := append(small[:0], "business_status")
	for k := range o.Details {
		if k != "business_status" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	dst = append(dst, '{')
	var err error
	for i, k := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		var v any = o.BusinessStatus
		if k != "business_status" {
			v = o.Details[k]
		}
		if dst, err = redact.AppendMember(dst, k, v); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// completeAndPublish records a final outcome in the next group commit, then
// publishes and acks. It returns at once: the group's flush carries on.
func (w *Worker) completeAndPublish(j *job, c journal.Completion, replayed bool) {
	c.Token = crashpoint.Token(w.work, w.d.Store, c.Key, c.Token)
	w.commit.Submit(w.work, c, func(err error) {
		if err != nil {
			w.completionFailed(j, err)
			return
		}
		rec := j.claim.Record
		rec.Status = c.Status
		rec.TargetObjectID = c.TargetObjectID
		rec.Result = c.Result
		rec.ErrorCode = c.ErrorCode
		rec.AttemptCount = j.claim.Attempt
		w.publishAndAck(j, w.resultFromRecord(j, rec, replayed))
	})
}

// completionFailed handles a completion the journal refused or could not take.
// A stale token means another owner has the operation; anything else leaves
// the outcome to the lease's expiry and reconciliation. Either way the
// command is redelivered, never acked unpublished.
func (w *Worker) completionFailed(j *job, err error) {
	log := w.log.With("operation_key", j.op.Key.String(), "lease_token", j.claim.Token, "error", err.Error())
	if errors.Is(err, journal.ErrStaleToken) {
		// Fencing working as designed: another owner (a take-over, an
		// operator's decision) has the operation and publishes its outcome.
		w.m.fenced.WithLabelValues("worker").Inc()
		log.Info("completion fenced off: another owner holds the operation")
	} else {
		log.Error("completion failed: the lease will expire and be reconciled")
	}
	w.nak(j, w.cfg.LeaseTTL)
}

func (w *Worker) resultFromRecord(j *job, rec journal.Record, replayed bool) operation.Result {
	r := operation.Result{
		OperationKey: rec.Key, EventID: j.op.EventID, Operation: j.op.Type, TargetSystem: rec.TargetSystem,
		TargetObjectID: rec.TargetObjectID, Result: rec.Result, ErrorCode: rec.ErrorCode,
		Attempts: rec.AttemptCount, Replayed: replayed, Status: resultStatus(rec.Status),
	}
	return r
}

// publishAndAck hands the result back to be published; the command is
// acked once JetStream has acknowledged it (consumer.Delivery.Answer).
func (w *Worker) publishAndAck(j *job, r operation.Result) { j.d.Answer(r) }

// publishPendingAndNak tells the agent the outcome is being settled, and
// brings the command back after delay.
func (w *Worker) publishPendingAndNak(j *job, delay time.Duration, attempts int) {
	j.d.AnswerThenNak(operation.Result{OperationKey: j.op.Key.String(), EventID: j.op.EventID, Operation: j.op.Type,
		Status: operation.ResultPending, TargetSystem: j.op.TargetSystem, Attempts: attempts}, delay)
}

// nak returns the command to JetStream after delay and releases its slot.
// On its last delivery the command is left to AckWait: JetStream then stops
// redelivering, and the journal row stays for the reconciler.
func (w *Worker) nak(j *job, delay time.Duration) {
	j.d.SetKey(j.op.Key.String())
	j.d.Nak(delay)
}

// reject terminates an undecodable command after publishing its rejected
// result: on idemgate.res.<operation> when a key could be derived, else on
// wire.RejectedSubject under the command's stream sequence, and to the
// command's reply subject either way. Every command gets an answer. Nothing
// in the result or the log quotes the command: the reason names fields only
// (operation.DecodeError), and event_id and the subject appear only when they
// passed the key rules. The command is terminated only once the result is
// published; a failed publish brings it back.
func (w *Worker) reject(j *job, err error) {
	w.m.rejected.Inc()
	var de *operation.DecodeError
	if !errors.As(err, &de) {
		de = &operation.DecodeError{Code: operation.CodeNotJSON, Msg: "undecodable command"}
	}
	r := de.RejectedResult()
	r.CommandSeq = j.d.StreamSeq()
	if r.EventID == "" && (de.Code == operation.CodeNotJSON || de.Code == operation.CodeTooLarge) {
		// The envelope was not read; its Nats-Msg-Id is the event id by
		// contract, and is used when it is a safe one.
		if id := j.d.Header(wire.HeaderMsgID); operation.ValidateID("event_id", id) == nil {
			r.EventID = id
		}
	}
	j.traceRejected(string(de.Code))
	log := w.log.With("reason", string(de.Code), "field", de.Field, "detail", de.Msg,
		"operation_key", r.OperationKey, "event_id", r.EventID, "stream_seq", r.CommandSeq)
	if de.Operation != "" && j.d.Subject() == wire.CommandSubject(de.Operation) {
		log = log.With("subject", j.d.Subject()) // any other subject may hold anything
	}
	log.Warn("command rejected")
	j.d.Reject(r, string(de.Code))
}
