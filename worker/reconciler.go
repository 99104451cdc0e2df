package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// ReconcilerConfig tunes the reconciler. Zero fields take the defaults.
type ReconcilerConfig struct {
	// Interval between scans. Default 5s.
	Interval time.Duration `mapstructure:"interval"`
	// Batch is how many operations one scan takes over. Default 100.
	Batch int `mapstructure:"batch"`
	// ReviewAfter raises an unknown operation for an operator after this many
	// unsettled lookups (metric, log, `idemgate trace --unresolved`). Default 5.
	ReviewAfter int `mapstructure:"review_after"`
	// IdleAfter reports a retryable failure nobody has retried for this
	// long (its command's deliveries may have run out): metric, log and
	// `idemgate trace --unresolved`. Default 1h.
	IdleAfter time.Duration `mapstructure:"idle_after"`
}

// WithDefaults fills zero fields.
func (c ReconcilerConfig) WithDefaults() ReconcilerConfig {
	if c.Interval == 0 {
		c.Interval = 5 * time.Second
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.ReviewAfter == 0 {
		c.ReviewAfter = 5
	}
	if c.IdleAfter == 0 {
		c.IdleAfter = time.Hour
	}
	return c
}

// Reconciler settles outcomes nobody is settling: unknown operations and
// started ones whose lease expired (a crashed owner). It takes each over with
// a new fencing token (SKIP LOCKED, so replicas share the work), looks it up
// in the target by key before anything else, and publishes what it finds.
// "Not found" leaves the operation failed_retryable: the command's next
// delivery retries it with the same key.
type Reconciler struct {
	cfg  ReconcilerConfig
	wcfg Config
	d    Deps

	once, stopOnce sync.Once
	cancel         context.CancelFunc
	done           chan struct{}
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
	fillDeps(&d)
	return &Reconciler{cfg: cfg, wcfg: wcfg, d: d}, nil
}

// Start runs scans every Interval until Stop.
func (r *Reconciler) Start(ctx context.Context) error {
	started := false
	r.once.Do(func() {
		started = true
		ctx, r.cancel = context.WithCancel(ctx)
		r.done = make(chan struct{})
		go func() {
			defer close(r.done)
			t := time.NewTicker(r.cfg.Interval)
			defer t.Stop()
			for {
				if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
					r.d.Log.Error("reconcile pass failed", "error", err.Error())
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	})
	if !started {
		return errors.New("reconciler: already started")
	}
	return nil
}

// Stop ends the loop; safe to call twice.
func (r *Reconciler) Stop() {
	r.stopOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
	})
}

// Settled counts what a pass did.
type Settled struct {
	Found, NotFound, Unsettled, Raised int
	// IdleRetryable counts retryable failures idle past IdleAfter.
	IdleRetryable int
}

// RunOnce takes over and settles one batch.
func (r *Reconciler) RunOnce(ctx context.Context) (Settled, error) {
	var s Settled
	claims, err := r.d.Store.TakeOverStale(ctx, r.wcfg.Owner, r.wcfg.LeaseTTL, r.cfg.Batch)
	if err != nil {
		return s, err
	}
	for _, c := range claims {
		if err := r.settle(ctx, c, &s); err != nil {
			r.d.Log.Error("reconcile failed", "operation_key", c.Record.Key, "lease_token", c.Token, "error", err.Error())
		}
	}
	if list, err := r.d.Store.ListUnresolved(ctx, r.cfg.ReviewAfter, 1000); err == nil {
		r.d.Metrics.unresolved.Set(float64(len(list)))
	}
	if idle, err := r.d.Store.ListIdleRetryable(ctx, r.cfg.IdleAfter, 1000); err == nil {
		r.d.Metrics.idleRetryable.Set(float64(len(idle)))
		s.IdleRetryable = len(idle)
		if len(idle) > 0 {
			r.d.Log.Warn("retryable operations wait for a command delivery that has not come: the agent must resend them (idemgate trace --unresolved)",
				"operations", len(idle), "idle_after", r.cfg.IdleAfter.String(), "oldest", idle[0].Key)
		}
	}
	return s, nil
}

func (r *Reconciler) settle(ctx context.Context, c journal.Claim, s *Settled) error {
	rec := c.Record
	key, err := operation.ParseKey(rec.Key)
	if err != nil {
		return fmt.Errorf("stored key: %w", err)
	}
	a, ok := r.d.Adapters[rec.OperationType]
	if !ok {
		// Nothing can look it up: leave it unknown for an operator.
		return r.unsettled(ctx, c, s, "no adapter configured for "+rec.OperationType)
	}
	// The journal keeps no payload: a lookup goes by key only.
	op := operation.Operation{Key: key, EventID: rec.EventID, Type: rec.OperationType, TargetSystem: rec.TargetSystem,
		ApprovalID: rec.ApprovalID, Fingerprint: rec.RequestHash}
	v := lookup(withAttempt(ctx, rec, c.Attempt), r.d.Store, a, op, r.wcfg.CallTimeout)
	crashpoint.Do(crashpoint.BlindRetry, func() { v = verdict{status: adapters.NotFound, note: "reconciled: not found by key"} })
	log := r.d.Log.With("operation_key", rec.Key, "lease_token", c.Token, "lookup", string(v.status))
	switch v.status {
	case adapters.Found:
		s.Found++
		r.d.Metrics.reconciled.WithLabelValues("found").Inc()
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
		r.d.Metrics.reconciled.WithLabelValues("not_found").Inc()
		log.Info(v.note)
		return journal.CompleteOne(ctx, r.d.Store, journal.Completion{Key: rec.Key, Token: c.Token, Status: journal.StatusFailedRetryable,
			Reconciled: true, Note: v.note, ErrorCode: rec.ErrorCode})
	default:
		if v.settling {
			// Not a spent round: the search has not caught up yet.
			return journal.CompleteOne(ctx, r.d.Store, journal.Completion{Key: rec.Key, Token: c.Token,
				Status: journal.StatusUnknown, Note: v.note, ErrorCode: rec.ErrorCode, HoldFor: v.retryIn})
		}
		return r.unsettled(ctx, c, s, v.note)
	}
}

func (r *Reconciler) unsettled(ctx context.Context, c journal.Claim, s *Settled, note string) error {
	s.Unsettled++
	r.d.Metrics.reconciled.WithLabelValues("indeterminate").Inc()
	// Lookups back off between rounds, as retries do.
	hold := r.wcfg.Retry.Delay(c.Record.ReconcileRounds+1, 0)
	if err := journal.CompleteOne(ctx, r.d.Store, journal.Completion{Key: c.Record.Key, Token: c.Token, Status: journal.StatusUnknown,
		Reconciled: true, Note: note, ErrorCode: c.Record.ErrorCode, HoldFor: hold}); err != nil {
		return err
	}
	if c.Record.ReconcileRounds+1 >= r.cfg.ReviewAfter {
		s.Raised++
		r.d.Log.Error("unknown outcome needs an operator: see idemgate trace --unresolved and idemgate resolve",
			"operation_key", c.Record.Key, "rounds", c.Record.ReconcileRounds+1, "note", note)
	}
	return nil
}

// publishRecord publishes a journal row's outcome synchronously.
func publishRecord(ctx context.Context, d Deps, rec journal.Record) error {
	if d.JS == nil {
		return nil
	}
	res := operation.Result{OperationKey: rec.Key, EventID: rec.EventID, Operation: rec.OperationType,
		TargetSystem: rec.TargetSystem, TargetObjectID: rec.TargetObjectID, Result: rec.Result,
		ErrorCode: rec.ErrorCode, Attempts: rec.AttemptCount}
	switch rec.Status {
	case journal.StatusSucceeded:
		res.Status = operation.ResultSucceeded
	case journal.StatusFailedFinal:
		res.Status = operation.ResultFailedFinal
	default:
		res.Status = operation.ResultPending
	}
	m, err := consumer.ResultMsg(res)
	if err != nil {
		return err
	}
	if _, err := d.JS.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish result of %s: %w", rec.Key, err)
	}
	d.Metrics.results.WithLabelValues(string(res.Status)).Inc()
	return nil
}
