package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/journal"
)

// execute calls the target under the lease, retrying retry-class failures
// inside the claim while the policy's next delay fits in retry.in_lease. It
// is a backoff.Retry loop over one attempt at a time:
//
//   - the BackOff is the retry policy (NextRetry of the journal's attempt
//     number, at least the target's Retry-After), and Stop when the intent's
//     budget is spent or the wait would outgrow the claim;
//   - before each wait the attempt is recorded failed_retryable with a hold
//     of exactly that delay, so that the journal — not this process — says
//     when the next attempt may start: copies and redeliveries that claim
//     earlier are sent away (InProgress) without taking an attempt;
//   - an answer that ends the loop (never_retry, reconcile_before_retry, a
//     lost lease, a claim that is no longer ours) is backoff.Permanent.
//
// Each retry is a new attempt in the journal (failed_retryable → started
// under a new token), with the same key at the target. It runs on a stack
// grown for it (growStack): an executor's (goExecute), or a reconciliation's.
//
// A call first takes its place in the account's client-side rate limit
// (admit). A wait for it is no failed attempt: the attempt is recorded
// throttled (client_rate_limited, nothing sent) and held for exactly that
// wait, in hand, spending no retry budget (budget.go), and the call is made
// in that place by the next attempt; places are served in the order calls
// took them.
func (w *Worker) execute(j *job) {
	w.executing.Add(1)
	ctx, cancel := context.WithCancel(w.work)
	defer cancel()
	r := &retryRun{w: w, j: j, adapter: w.d.Adapters[j.op.Type], began: time.Now(), ctx: ctx, cancel: cancel}
	r.rules = w.rules[r.adapter.Name()]
	r.fresh = r.startsFresh()
	keep := w.beats.track(j, "", 0) // the command's AckWait, through the waits
	// No elapsed-time limit of the library's (v5 defaults to 15 minutes): the
	// policy's in-lease bound and the intent's budget end the loop (Stop).
	out, err := backoff.Retry(r.ctx, r.attempt, backoff.WithBackOff(r), backoff.WithNotify(r.waiting), backoff.WithMaxElapsedTime(0))
	w.beats.untrack(keep)
	if r.admission != nil {
		r.admission.Cancel() // a place no call took is given back
	}
	w.executing.Add(-1) // before its completion: a lone one is committed at once
	r.finish(out, err)
}

// retryRun is one execute loop: the state its attempts, its BackOff and its
// notifications share.
type retryRun struct {
	w       *Worker
	j       *job
	adapter adapters.Adapter
	rules   classifier
	// began is when this worker took the command (the in-lease bound).
	began  time.Time
	ctx    context.Context // ends on shutdown or when a hold failed to record
	cancel context.CancelFunc
	// tries counts this run's attempts; from the second on, each claims
	// its attempt first.
	tries int
	// admission is the call's place in the client-side rate limit, taken
	// and not yet used by a call.
	admission *adapters.Admission
	// fresh: no attempt so far can have reached the target (each was held
	// back by a rate limit), so the call is a first one for the adapter.
	fresh bool
	// last is the last retry-class error; delay the wait NextBackOff chose
	// after it; exhausted is set when the budget stopped the loop.
	last      *adapters.Error
	delay     time.Duration
	exhausted bool
	// held is the token whose attempt was recorded failed_retryable with a
	// hold; holdErr a failure to record it.
	held    int64
	holdErr error
}

// Reasons an attempt ends the loop (wrapped in backoff.Permanent).
type (
	// errEnded: a never_retry or reconcile_before_retry answer.
	errEnded struct {
		class adapters.Class
		ae    *adapters.Error
	}
	// errLeaseLost: another owner took the lease over during the call; out
	// and err are what the call returned.
	errLeaseLost struct {
		out adapters.Outcome
		err error
	}
	// errHandOff: the re-claim decided something other than Execute.
	errHandOff struct{}
	// errStopped: the loop's context ended before an attempt.
	errStopped struct{}
	// errLeaseRanOut: the claim's lease had run out (or nearly) on this
	// process's clock before the call: nothing was sent.
	errLeaseRanOut struct{}
)

// leaseMargin is the least lease a call may start with (a quarter of the
// lease, at most a second): a call never starts once the lease may have
// been taken over, so a take-over's reconciler only has to wait out calls
// that began before it.
func (w *Worker) leaseMargin() time.Duration { return min(time.Second, w.cfg.LeaseTTL/4) }

func (e *errEnded) Error() string     { return e.ae.Error() }
func (e *errLeaseLost) Error() string { return "lease lost during the call" }
func (errHandOff) Error() string      { return "the operation is no longer this worker's to execute" }
func (errStopped) Error() string      { return "stopped" }
func (errLeaseRanOut) Error() string  { return "the lease ran out before the call" }

// attempt makes one call to the target; from the second on, it first claims
// the next attempt in the journal.
func (r *retryRun) attempt() (adapters.Outcome, error) {
	w, j := r.w, r.j
	if r.ctx.Err() != nil {
		return adapters.Outcome{}, backoff.Permanent(errStopped{})
	}
	if r.tries > 0 {
		if err := r.reclaim(); err != nil {
			return adapters.Outcome{}, backoff.Permanent(err)
		}
	}
	r.tries++
	if err := r.admit(); err != nil {
		return adapters.Outcome{}, err
	}
	if !j.leaseBy.IsZero() && time.Until(j.leaseBy) < w.leaseMargin() && !crashpoint.Broken(crashpoint.NoFencing) {
		return adapters.Outcome{}, backoff.Permanent(errLeaseRanOut{})
	}
	key := j.op.Key.String()
	w.recordTrace(j) // before the call's timeout starts
	lease := w.beats.trackCall(j, key, j.claim.Token, w.cfg.CallTimeout)
	began := time.Now()
	cctx := withAttempt(lease.ctx, j.claim.Record, j.claim.Attempt, r.fresh)
	if r.admission != nil {
		cctx = r.admission.Bind(cctx)
		r.admission = nil // the call's requests take its place
	}
	actx, span := j.startAttemptSpan(cctx, "execute")
	out, err := r.adapter.Execute(actx, j.op)
	observe(w.m.calls.WithLabelValues(j.op.Type), time.Since(began), span)
	lost := lease.lost.Load() && !crashpoint.Broken(crashpoint.NoFencing)
	w.beats.untrack(lease)
	if err == nil {
		w.m.called(r.adapter.Name(), "", nil)
	}
	if lost {
		endAttemptSpan(span, "", nil)
		if err != nil {
			class, _ := r.rules.classify(err)
			w.m.called(r.adapter.Name(), class, err)
		}
		return out, backoff.Permanent(&errLeaseLost{out: out, err: err})
	}
	if err == nil {
		endAttemptSpan(span, "", nil)
		return out, nil
	}
	class, ae := r.rules.classify(err)
	endAttemptSpan(span, class, ae)
	w.m.called(r.adapter.Name(), class, err)
	if class != adapters.Retry {
		return out, backoff.Permanent(&errEnded{class: class, ae: ae})
	}
	r.last = ae
	r.fresh = r.fresh && adapters.Throttled(ae.Code)
	return out, ae
}

// reclaim claims the next attempt after a wait. The local timer can end a
// hair before the journal's hold (the hold began when the failure was
// recorded): when the hold is still ours, its rest is waited out once.
func (r *retryRun) reclaim() error {
	w, j := r.w, r.j
	crashpoint.Do(crashpoint.UnboundedWait, func() { time.Sleep(100 * time.Millisecond) })
	for waited := false; ; waited = true {
		sent := time.Now()
		c, err := journal.ClaimOne(w.work, w.d.Store, w.claimRequest(j.op))
		if err != nil {
			return fmt.Errorf("re-claim: %w", err)
		}
		j.setClaim(c, sent)
		if c.Decision == journal.Execute {
			return nil
		}
		ours := c.Decision == journal.InProgress && c.Record.Status == journal.StatusFailedRetryable && c.Record.LeaseToken == r.held
		if !ours || waited || c.Wait() > time.Second {
			return errHandOff{}
		}
		t := time.NewTimer(c.Wait() + holdSlack)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			return errStopped{}
		}
	}
}

// NextBackOff is the retry policy's delay after the current attempt (at
// least the target's Retry-After), or Stop when the intent's budget is
// spent or the wait would outgrow the claim (the journal's hold and a
// redelivery take over then). A wait for the call's place in the
// client-side rate limit is exactly until it is due, in hand however long;
// it and a target's rate-limit refusal spend no budget.
func (r *retryRun) NextBackOff() time.Duration {
	if r.ctx.Err() != nil {
		return backoff.Stop
	}
	if r.admission != nil {
		r.delay = r.admission.Delay()
		return r.delay
	}
	p := r.w.cfg.Retry
	d := max(p.NextRetry(r.j.claim.Attempt), r.last.RetryAfter)
	r.delay = d
	if !adapters.Throttled(r.last.Code) && r.spent(d) {
		r.exhausted = true
		return backoff.Stop
	}
	if time.Since(r.began)+d+r.w.cfg.CallTimeout > p.InLease {
		return backoff.Stop
	}
	return d
}

// spent reports whether the intent's retry budget is spent for an attempt
// d from now (budget.go).
func (r *retryRun) spent(d time.Duration) bool {
	settle := settleFor(r.adapter.Capabilities(), r.w.cfg.CallTimeout)
	spent, err := r.w.cfg.Retry.spentBy(r.ctx, r.w.d.Store, r.j.claim.Record, r.j.claim.Attempt, r.j.age(), d, settle)
	if err != nil {
		r.log().Warn("the attempts trail could not be read: the attempt count and the age decide the retry budget", "error", err.Error())
	}
	return spent
}

// Reset is part of backoff.BackOff; the schedule follows the journal's
// attempt number, not a count of its own. (The loop runs in r.ctx: a wait
// ends early when the worker shuts down past its drain, or when a hold
// failed to record.)
func (r *retryRun) Reset() {}

// waiting records the failed attempt with its hold before the in-lease wait.
// If it cannot be recorded the wait is cut short and the loop ends.
func (r *retryRun) waiting(_ error, d time.Duration) {
	if err := r.hold(d); err != nil {
		r.holdErr = err
		r.cancel()
		return
	}
	r.log().Info("retrying", "delay", d.String())
}

// hold records the current attempt as failed_retryable, held for d.
func (r *retryRun) hold(d time.Duration) error {
	j := r.j
	note := ""
	if r.admission != nil {
		note = "nothing sent: held for the call's turn in the client-side rate limit"
	}
	err := r.w.commit.Complete(r.w.work, journal.Completion{Key: j.op.Key.String(), Token: j.claim.Token,
		Status: journal.StatusFailedRetryable, ErrorCode: r.last.Code, TargetRequestID: r.last.RequestID, Note: note, HoldFor: d})
	if err == nil {
		r.held = j.claim.Token
		r.w.m.retries.Inc()
	}
	return err
}

func (r *retryRun) log() *slog.Logger {
	l := r.w.log.With("operation_key", r.j.op.Key.String(), "attempt", r.j.claim.Attempt)
	if ids := r.j.logAttrs(); ids != nil {
		l = l.With(ids...)
	}
	if r.last != nil {
		l = l.With("error_code", r.last.Code)
	}
	return l
}

// finish acts on how the loop ended.
func (r *retryRun) finish(out adapters.Outcome, err error) {
	w, j := r.w, r.j
	key := j.op.Key.String()
	var (
		ended *errEnded
		lost  *errLeaseLost
	)
	switch {
	case err == nil:
		crashpoint.Hit(crashpoint.BeforeComplete)
		w.m.executed.Inc()
		reportDuplicates(w.d, r.adapter, key, out)
		w.completeAndPublish(j, journal.Completion{
			Key: key, Token: j.claim.Token, Status: journal.StatusSucceeded,
			TargetObjectID: out.ObjectID, Result: w.outcomeJSON(out), TargetRequestID: out.RequestID,
		}, false)
	case r.holdErr != nil:
		w.completionFailed(j, r.holdErr)
	case errors.As(err, &lost):
		r.fenced(lost)
	case errors.As(err, &ended):
		r.ended(ended.class, ended.ae)
	case errors.Is(err, errHandOff{}):
		w.dispatch(j)
	case errors.Is(err, errLeaseRanOut{}):
		// This process stood still past its lease (a stop, a stall):
		// another owner may hold the operation now. Nothing was sent; the
		// command comes back and the journal decides who acts.
		r.log().Warn("the lease ran out before the call: nothing sent", "lease_token", j.claim.Token)
		w.nak(j, time.Second)
	case errors.Is(err, errStopped{}) || errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdown):
		// Cut short by shutdown: the attempt was recorded with its hold
		// (or its lease expires into reconciliation); the command comes
		// back after it.
		w.nak(j, r.delay)
	case r.last != nil && errors.Is(err, r.last):
		if r.exhausted {
			r.exhaust()
			return
		}
		// Longer waits release the command: the journal's hold keeps every
		// copy away until the next attempt is due.
		if err := r.hold(r.delay); err != nil {
			w.completionFailed(j, err)
			return
		}
		r.log().Info("retry later by redelivery", "delay", r.delay.String())
		w.nak(j, r.delay+holdSlack)
	default: // the re-claim failed
		r.log().Error("re-claim failed", "error", err.Error())
		w.nak(j, w.cfg.Retry.NextRetry(j.claim.Attempt))
	}
}

// ended handles a never_retry or reconcile_before_retry answer.
func (r *retryRun) ended(class adapters.Class, ae *adapters.Error) {
	w, j := r.w, r.j
	log := r.log().With("error_code", ae.Code, "class", string(class))
	if class == adapters.NeverRetry && !j.claim.Record.EffectPossible {
		log.Info("final failure from target")
		w.m.failedFinal.Inc()
		w.completeAndPublish(j, journal.Completion{Key: j.op.Key.String(), Token: j.claim.Token, Status: journal.StatusFailedFinal,
			ErrorCode: ae.Code, TargetRequestID: ae.RequestID}, false)
		return
	}
	note := ""
	if class == adapters.NeverRetry {
		// An earlier attempt may have taken effect (its answer was lost): the
		// target's refusal may be about that effect (funds already taken).
		note = "final answer after an earlier outcome was unknown: looked up before it may be final"
		log.Warn("final answer after an unknown outcome: lookup first")
	} else {
		// The effect may have happened: never retried blindly.
		log.Warn("outcome unknown: reconciliation before any retry")
	}
	r.unknown(ae, note)
}

// exhaust ends an intent whose retry budget is spent on a retry-class
// answer: failed_final, unless an earlier attempt's outcome was unknown —
// the target may hold the object, so it is looked up first.
func (r *retryRun) exhaust() {
	w, j := r.w, r.j
	ae := r.last
	w.m.exhausted.Inc()
	if j.claim.Record.EffectPossible {
		r.log().Warn("retries exhausted after an unknown outcome: lookup before it may be final")
		r.unknown(ae, "retries exhausted after an earlier outcome was unknown: looked up before it may be final")
		return
	}
	r.log().Warn("retries exhausted")
	w.m.failedFinal.Inc()
	w.completeAndPublish(j, journal.Completion{Key: j.op.Key.String(), Token: j.claim.Token, Status: journal.StatusFailedFinal,
		ErrorCode: ae.Code, TargetRequestID: ae.RequestID, Note: "retries exhausted"}, false)
}

// unknown records the attempt's outcome as unknown, held until a lookup can
// answer truly, and brings the command back to reconcile it: as soon as a
// lookup can answer (the settle time), since one read ends the uncertainty
// and only a second call needs the retry policy's delay; for a target that
// cannot be looked up, whose reconciliation is a call with the same key,
// after that delay.
func (r *retryRun) unknown(ae *adapters.Error, note string) {
	w, j := r.w, r.j
	w.m.unknown.Inc()
	caps := r.adapter.Capabilities()
	settle := settleFor(caps, w.cfg.CallTimeout)
	back := settle + holdSlack
	if !caps.Lookup {
		back = max(back, w.cfg.Retry.NextRetry(1))
	}
	key := j.op.Key.String()
	if err := w.commit.Complete(w.work, journal.Completion{Key: key, Token: w.fencingToken(key, j.claim.Token), Status: journal.StatusUnknown,
		ErrorCode: ae.Code, TargetRequestID: ae.RequestID, Note: note, HoldFor: settle}); err != nil {
		w.completionFailed(j, err)
		return
	}
	rec := j.claim.Record
	rec.Status, rec.ErrorCode, rec.AttemptCount = journal.StatusUnknown, ae.Code, j.claim.Attempt
	w.publishPendingAndNak(j, back, rec)
}

// fenced handles a call whose lease was taken over while it ran: the new
// owner reconciles and publishes. What this call found is still offered to
// the journal, which refuses it for the stale token and keeps it in the
// attempts trail (outcome fenced).
func (r *retryRun) fenced(l *errLeaseLost) {
	w, j := r.w, r.j
	c := journal.Completion{Key: j.op.Key.String(), Token: j.claim.Token, Status: journal.StatusSucceeded,
		TargetObjectID: l.out.ObjectID, TargetRequestID: l.out.RequestID}
	if l.err != nil {
		class, ae := r.rules.classify(l.err)
		c = journal.Completion{Key: c.Key, Token: c.Token, Status: journal.StatusUnknown, ErrorCode: ae.Code, TargetRequestID: ae.RequestID}
		switch class {
		case adapters.Retry:
			c.Status = journal.StatusFailedRetryable
		case adapters.NeverRetry:
			c.Status = journal.StatusFailedFinal
		}
	}
	err := w.commit.Complete(w.work, c)
	if err == nil { // cannot happen while the heartbeat saw the token stale
		err = fmt.Errorf("complete %s: %w", c.Key, journal.ErrStaleToken)
	}
	w.completionFailed(j, err)
}
