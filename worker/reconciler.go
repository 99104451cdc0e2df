package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// ReconcilerConfig tunes the reconciler. Zero fields take the defaults.
type ReconcilerConfig struct {
	// Interval between scans. Default 5s.
	Interval time.Duration `mapstructure:"interval"`
	// Batch is how many operations one scan takes over. Default 100.
	Batch int `mapstructure:"batch"`
	// ReviewAfter: an unknown operation with this many unsettled lookups is
	// unresolved: raised for an operator (metric, log, every face's answer
	// human_review, `idemgate trace --unresolved`). Default
	// answer.DefaultReviewAfter (5).
	ReviewAfter int `mapstructure:"review_after"`
	// IdleAfter: a retryable failure nobody has retried for this long (its
	// command's deliveries may have run out) is unresolved: the agent must
	// resend it (metric, log, every face's answer retry_same_intent,
	// `idemgate trace --unresolved`). Default answer.DefaultIdleAfter (1h).
	IdleAfter time.Duration `mapstructure:"idle_after"`
}

// Thresholds are the answers' thresholds this configuration sets.
func (c ReconcilerConfig) Thresholds() answer.Thresholds {
	return answer.Thresholds{ReviewAfter: c.ReviewAfter, IdleAfter: c.IdleAfter}.WithDefaults()
}

// WithDefaults fills zero fields.
func (c ReconcilerConfig) WithDefaults() ReconcilerConfig {
	c.Interval = cmp.Or(c.Interval, 5*time.Second)
	c.Batch = cmp.Or(c.Batch, 100)
	c.ReviewAfter = cmp.Or(c.ReviewAfter, answer.DefaultReviewAfter)
	c.IdleAfter = cmp.Or(c.IdleAfter, answer.DefaultIdleAfter)
	return c
}

// Reconciler settles outcomes nobody is settling: unknown operations and
// started ones whose lease expired (a crashed owner). It takes each over with
// a new fencing token (SKIP LOCKED, so replicas share the work), looks it up
// in the target by key before anything else, and publishes what it finds.
// "Not found" leaves the operation failed_retryable — the command's next
// delivery retries it with the same key — unless the retry budget is spent:
// then it is failed_final. A completion refused for a stale token (another
// reconciler, a redelivery or an operator took the operation over) is
// fencing at work: logged at info and counted, and a final outcome the
// other owner recorded is published.
type Reconciler struct {
	cfg   ReconcilerConfig
	wcfg  Config
	d     Deps
	rules map[string]classifier

	startstop.BaseStartStop
}

// NewReconciler builds a reconciler sharing the worker's dependencies.
func NewReconciler(cfg ReconcilerConfig, wcfg Config, d Deps) (*Reconciler, error) {
	cfg = cfg.WithDefaults()
	if cfg.Interval <= 0 || cfg.Batch < 1 || cfg.ReviewAfter < 1 || cfg.IdleAfter <= 0 {
		return nil, errors.New("reconciler: interval, batch, review_after and idle_after must be positive")
	}
	if d.Store == nil {
		return nil, errors.New("reconciler: a journal is required")
	}
	wcfg = wcfg.WithDefaults()
	d.Answers.ReviewAfter, d.Answers.IdleAfter = cfg.ReviewAfter, cfg.IdleAfter
	fillDeps(&d)
	rules, err := adapterRules(wcfg, d.Adapters)
	if err != nil {
		return nil, err
	}
	return &Reconciler{cfg: cfg, wcfg: wcfg, d: d, rules: rules}, nil
}

// Start runs scans every Interval until Stop (or until ctx ends).
func (r *Reconciler) Start(ctx context.Context) error {
	return startEvery(ctx, &r.BaseStartStop, "reconciler", r.cfg.Interval, func(ctx context.Context) {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.d.Log.Error("reconcile pass failed", "error", err.Error())
		}
	})
}

// startEvery is the Start of a periodic service (the reconciler, the
// janitor): pass runs at once and then every interval on a goroutine of its
// own until s stops or ctx ends.
func startEvery(ctx context.Context, s *startstop.BaseStartStop, name string, interval time.Duration, pass func(context.Context)) error {
	ctx, shouldStart, started, stopped := s.StartInit(ctx)
	if !shouldStart {
		return fmt.Errorf("%s: %w", name, startstop.ErrAlreadyStarted)
	}
	go func() {
		started()
		defer stopped()
		every(ctx, interval, func() { pass(ctx) })
	}()
	return nil
}

// every runs pass at once and then every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, pass func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pass()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Settled counts what a pass did.
type Settled struct {
	Found, NotFound, Unsettled, Raised int
	// Failed counts operations whose settlement failed (a journal write or
	// a result publish, logged each), and journal reads of the pass that
	// failed.
	Failed int
	// IdleRetryable counts retryable failures idle past IdleAfter.
	IdleRetryable int
}

// RunOnce takes over and settles one batch. The batch's lookups run
// concurrently, at most worker.max_in_flight at once (the adapters'
// connection pools are sized to it): a batch of operations whose target is
// slow to answer takes the time of its slowest lookups, not their sum.
func (r *Reconciler) RunOnce(ctx context.Context) (Settled, error) {
	var s Settled
	claims, err := r.d.Store.TakeOverStale(ctx, r.wcfg.Owner, r.wcfg.LeaseTTL, r.cfg.Batch)
	if err != nil {
		return s, err
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		slot = make(chan struct{}, max(1, r.wcfg.MaxInFlight))
	)
	for _, c := range claims {
		slot <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slot; wg.Done() }()
			var one Settled
			err := r.settle(ctx, c, time.Now(), &one)
			switch {
			case errors.Is(err, journal.ErrStaleToken):
				r.fencedOff(ctx, c, err)
			case err != nil:
				one.Failed++
				r.d.Log.Error("reconcile failed", "operation_key", c.Record.Key, "lease_token", c.Token, "error", err.Error())
			}
			mu.Lock()
			s.Found, s.NotFound, s.Unsettled = s.Found+one.Found, s.NotFound+one.NotFound, s.Unsettled+one.Unsettled
			s.Failed += one.Failed
			mu.Unlock()
		}()
	}
	wg.Wait()
	l, err := r.cfg.Thresholds().ListUnresolved(ctx, r.d.Store, 1000)
	if err != nil {
		s.Failed++
		r.d.Log.Error("unresolved operations not read", "error", err.Error())
		return s, nil
	}
	for _, k := range answer.Kinds() {
		r.d.Metrics.unresolved.WithLabelValues(string(k)).Set(float64(len(l.Of(k))))
	}
	s.Raised = r.raise(ctx, l.Unknown)
	s.IdleRetryable = len(l.IdleRetry)
	if idle := l.IdleRetry; len(idle) > 0 {
		r.d.Log.Warn("retryable operations wait for a command delivery that has not come: the agent must resend them (idemgate trace --unresolved)",
			"operations", len(idle), "idle_after", r.cfg.IdleAfter.String(), "oldest", idle[0].Key)
	}
	return s, nil
}

// raise marks the unresolved operations not yet raised for review and
// alerts once for each: whichever replica marks it first logs it.
func (r *Reconciler) raise(ctx context.Context, list []journal.Record) int {
	var keys []string
	rounds := map[string]journal.Record{}
	for _, rec := range list {
		if rec.RaisedAt.IsZero() {
			keys = append(keys, rec.Key)
			rounds[rec.Key] = rec
		}
	}
	raised, err := r.d.Store.RaiseForReview(ctx, keys)
	if err != nil {
		r.d.Log.Warn("raising for review failed", "operations", len(keys), "error", err.Error())
		return 0
	}
	for _, k := range raised {
		rec := rounds[k]
		r.d.Log.Error("unknown outcome needs an operator: see idemgate trace --unresolved and idemgate resolve",
			"operation_key", k, "rounds", rec.ReconcileRounds, "error_code", rec.ErrorCode)
	}
	return len(raised)
}

// fencedOff handles a completion refused for a stale token: another owner
// took the operation over while this pass looked it up. Fencing working as
// designed is not an error. If that owner recorded a final outcome (an
// operator's decision), it is published: the agent waiting for this
// operation learns it now.
func (r *Reconciler) fencedOff(ctx context.Context, c journal.Claim, err error) {
	r.d.Metrics.fenced.WithLabelValues("reconciler").Inc()
	log := r.d.Log.With("operation_key", c.Record.Key, "lease_token", c.Token)
	rec, gerr := r.d.Store.Get(ctx, c.Record.Key)
	if gerr != nil {
		log.Info("reconcile fenced off: another owner took the operation over", "error", err.Error())
		return
	}
	log.Info("reconcile fenced off: another owner took the operation over", "owner", rec.LeaseOwner, "status", string(rec.Status))
	if rec.Status.Terminal() {
		if perr := publishRecord(ctx, r.d, rec); perr != nil {
			log.Warn("final outcome not published: the command's next delivery replays it", "error", perr.Error())
		}
	}
}

// settle looks one taken-over operation up and records what it found.
// taken is when the claim came back (the operation's age counts from it).
func (r *Reconciler) settle(ctx context.Context, c journal.Claim, taken time.Time, s *Settled) error {
	rec := c.Record
	key, err := operation.ParseKey(rec.Key)
	if err != nil {
		return fmt.Errorf("stored key: %w", err)
	}
	a, ok := r.d.Adapters[rec.OperationType]
	if !ok {
		// Nothing can look it up: leave it unknown for an operator.
		r.d.Metrics.reconciled.WithLabelValues(lookupIndeterminate).Inc()
		return r.unsettled(ctx, c, s, "no adapter configured for "+rec.OperationType)
	}
	// The journal keeps no payload: a lookup goes by key only.
	op := operation.Operation{Key: key, EventID: rec.EventID, Type: rec.OperationType, TargetSystem: rec.TargetSystem,
		ApprovalID: rec.ApprovalID, Fingerprint: rec.RequestHash}
	v := lookup(ctx, r.d.Store, a, op, rec, c.Attempt, r.wcfg.CallTimeout)
	crashpoint.Do(crashpoint.BlindRetry, func() {
		v = verdict{status: adapters.NotFound, quietFor: time.Duration(1<<62 - 1), note: "reconciled: not found by key"}
	})
	r.d.Metrics.reconciled.WithLabelValues(v.result()).Inc()
	used := budgetOf(v.trail, rec, c.Age()+time.Since(taken), settleFor(a.Capabilities(), r.wcfg.CallTimeout))
	final, finalNote := notFoundIsFinal(r.wcfg.Retry, r.rules[a.Name()], rec, used)
	v = finalWhenQuiet(v, final, r.wcfg.CallTimeout)
	log := r.d.Log.With("operation_key", rec.Key, "lease_token", c.Token, "lookup", string(v.status))
	switch v.status {
	case adapters.Found:
		s.Found++
		reportDuplicates(r.d, a, rec.Key, v.outcome.Outcome)
		comp := v.completion(rec.Key, c.Token, outcomeJSON(r.d, v.outcome.Outcome))
		if err := journal.CompleteOne(ctx, r.d.Store, comp); err != nil {
			return err
		}
		log.Info(v.note, "target_object_id", comp.TargetObjectID)
		final, err := r.d.Store.Get(ctx, rec.Key)
		if err != nil {
			return err
		}
		return publishRecord(ctx, r.d, final)
	case adapters.NotFound:
		s.NotFound++
		if final {
			if err := journal.CompleteOne(ctx, r.d.Store, journal.Completion{Key: rec.Key, Token: c.Token, Status: journal.StatusFailedFinal,
				Reconciled: true, Note: finalNote, ErrorCode: rec.ErrorCode}); err != nil {
				return err
			}
			r.d.Metrics.failedFinal.Inc()
			log.Warn(finalNote, "error_code", rec.ErrorCode)
			final, err := r.d.Store.Get(ctx, rec.Key)
			if err != nil {
				return err
			}
			return publishRecord(ctx, r.d, final)
		}
		log.Info(v.note)
		return journal.CompleteOne(ctx, r.d.Store, journal.Completion{Key: rec.Key, Token: c.Token, Status: journal.StatusFailedRetryable,
			Reconciled: true, Note: v.note, ErrorCode: rec.ErrorCode})
	default:
		if v.settling {
			// Not a spent round: the search has not caught up yet, or the
			// client-side rate limit held the lookup back.
			return journal.CompleteOne(ctx, r.d.Store, journal.Completion{Key: rec.Key, Token: c.Token,
				Status: journal.StatusUnknown, Note: v.note, ErrorCode: rec.ErrorCode, HoldFor: v.retryIn})
		}
		return r.unsettled(ctx, c, s, v.note)
	}
}

func (r *Reconciler) unsettled(ctx context.Context, c journal.Claim, s *Settled, note string) error {
	s.Unsettled++
	// Lookups back off between rounds along the retry schedule.
	hold := r.wcfg.Retry.NextRetry(c.Record.ReconcileRounds + 1)
	return journal.CompleteOne(ctx, r.d.Store, journal.Completion{Key: c.Record.Key, Token: c.Token, Status: journal.StatusUnknown,
		Reconciled: true, Note: note, ErrorCode: c.Record.ErrorCode, HoldFor: hold})
}

// ErrResultNotPublished: an operator's decision was recorded but its result
// could not be published; the command's next delivery replays it.
var ErrResultNotPublished = errors.New("worker: the resolved outcome was recorded but not published")

// Resolve records an operator's decision (journal.Store.Resolve: it wins
// over a reconciler's hold or lease, with a new fencing token) and publishes
// it as the command's result, so that the agent waiting for the operation
// gets it now. d needs the Store; without d.JS nothing is published. When
// only publishing fails, the record is returned with an error wrapping
// ErrResultNotPublished.
func Resolve(ctx context.Context, d Deps, r journal.Resolution) (journal.Record, error) {
	if d.Store == nil {
		return journal.Record{}, errors.New("resolve: a journal is required")
	}
	fillDeps(&d)
	rec, err := d.Store.Resolve(ctx, r)
	if err != nil {
		return rec, err
	}
	d.Log.Info("operation resolved by an operator", "operation_key", rec.Key, "status", string(rec.Status),
		"target_object_id", rec.TargetObjectID, "operator", r.Operator, "lease_token", rec.LeaseToken)
	if err := publishRecord(ctx, d, rec); err != nil {
		return rec, fmt.Errorf("%w: %w", ErrResultNotPublished, err)
	}
	return rec, nil
}

// publishRecord publishes a journal row's outcome synchronously.
func publishRecord(ctx context.Context, d Deps, rec journal.Record) error {
	if d.JS == nil {
		return nil
	}
	res := d.Answers.ResultFor(rec, time.Now())
	if err := consumer.PublishResult(ctx, d.JS, res); err != nil {
		return err
	}
	d.Metrics.results.WithLabelValues(string(res.Status)).Inc()
	return nil
}

// PublishResult publishes a journal row's outcome as its command's result
// (pending while it is not final), worded by th, e.g. after an operator's
// decision was recorded by a tool that holds no Deps.
func PublishResult(ctx context.Context, js consumer.JetStream, th answer.Thresholds, rec journal.Record) error {
	return consumer.PublishResult(ctx, js, th.WithDefaults().ResultFor(rec, time.Now()))
}
