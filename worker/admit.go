package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/operation"
)

// A call to a target whose account has a client-side rate limit
// (adapters.Admitter) first takes its place in the account's bucket:
// places are served in the order calls take them, and the worker waits for
// its place before it sends anything. Such a wait is no failed attempt and
// spends no retry budget (budget.go).

// admitInline is the longest wait for the call's place in the client-side
// rate limit made within the attempt; a longer one is held (admit).
func (w *Worker) admitInline() time.Duration { return min(time.Second, w.cfg.CallTimeout/4) }

// admit takes the call's place in the account's client-side rate limit
// (adapters.Admitter), once per call. A place due within admitInline is
// waited for here; a later one ends the attempt throttled
// (client_rate_limited, nothing sent), keeping the place: the loop holds
// the intent until it is due (NextBackOff), and the next attempt makes the
// call in it.
func (r *retryRun) admit() error {
	if r.admission == nil {
		ad, ok := r.adapter.(adapters.Admitter)
		if !ok {
			return nil
		}
		if r.admission = ad.Admit(r.j.op); r.admission == nil {
			return nil
		}
	}
	d := r.admission.Delay()
	if d > r.w.admitInline() {
		e := adapters.RateLimited(d, fmt.Errorf("rate limit: the call's turn comes in %v; nothing sent", d.Round(time.Millisecond)))
		r.last = e
		return e
	}
	if d > 0 && !ctxsleep.For(r.ctx, d) {
		return backoff.Permanent(errStopped{})
	}
	return nil
}

// startsFresh reports whether no attempt before the one just claimed can
// have reached the target: it is the first, or every earlier one was held
// back by a rate limit (the trail says so; it is read only when the row's
// last answer was one).
func (r *retryRun) startsFresh() bool {
	c := r.j.claim
	if c.Attempt <= 1 {
		return true
	}
	if c.Record.EffectPossible || !adapters.Throttled(c.Record.ErrorCode) {
		return false
	}
	atts, err := r.w.d.Store.Attempts(r.ctx, r.j.op.Key.String())
	return err == nil && onlyThrottled(atts, c.Token)
}

// waitTurn waits, within ctx, for a call's place in the adapter's
// client-side rate limit, and returns the context to make the call with
// (adapters.Admission.Bind) and done, which gives back a place no request
// took. A wait cut short by ctx leaves ctx to fail the call.
func waitTurn(ctx context.Context, a adapters.Adapter, op operation.Operation) (context.Context, func()) {
	ad, ok := a.(adapters.Admitter)
	if !ok {
		return ctx, func() {}
	}
	adm := ad.Admit(op)
	if adm == nil {
		return ctx, func() {}
	}
	if d := adm.Delay(); d > 0 && !ctxsleep.For(ctx, d) {
		adm.Cancel()
		return ctx, func() {}
	}
	return adm.Bind(ctx), adm.Cancel
}
