package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// verdict is what a lookup by key settled.
type verdict struct {
	status  adapters.LookupStatus
	outcome adapters.LookupResult
	// retryIn is when an unsettled lookup should be tried again.
	retryIn time.Duration
	note    string
	code    string
	// quietFor is, for a "not found", how long ago the last execute
	// attempt ended (its completion, or the take-over that abandoned it);
	// zero while one is open.
	quietFor time.Duration
	// settling: no lookup round was spent: the target's search has not
	// settled yet, or the adapter's own client-side rate limit held the
	// lookup back (nothing was sent; it is tried again after the wait the
	// limit asked for).
	settling bool
	// failed: the lookup call itself failed (status Indeterminate).
	failed bool
	// trail is the key's attempts trail as the lookup read it (nil when
	// it could not be read), for the retry budget (budgetOf).
	trail []journal.Attempt
}

// result labels the lookup in reconcile_lookups_total{result}.
func (v verdict) result() string {
	switch {
	case v.status == adapters.Found:
		return lookupFound
	case v.status == adapters.NotFound:
		return lookupNotFound
	case v.failed:
		return lookupError
	default:
		return lookupIndeterminate
	}
}

// lookup asks the target about an earlier attempt by the operation key,
// before anything else happens to an unknown outcome. The attempts trail,
// read first, tells the adapter when the calls for the key ran (Attempt
// Since and Until), so that a search of the target's objects by time reads
// that window first. A "not found" counts only once the adapter's settle
// time (its search lag) — and, for targets without a native key, the call
// timeout — has passed since the last attempt began; before that it is
// indeterminate.
func lookup(ctx context.Context, store journal.Store, a adapters.Adapter, op operation.Operation, rec journal.Record, attempt int, callTimeout time.Duration) (v verdict) {
	ctx, span := startLookupSpan(ctx, op)
	tr, trailErr := readTrail(ctx, store, op.Key.String())
	defer func() {
		v.trail = tr.atts
		endLookupSpan(span, v)
	}()
	att := adapters.Attempt{Number: attempt, Since: rec.CreatedAt}
	if trailErr == nil {
		att.Until = tr.until()
	}
	callCtx, cancel := context.WithTimeout(adapters.WithAttempt(ctx, att), callTimeout)
	res, err := a.Lookup(callCtx, op)
	cancel()
	if err != nil {
		ae := adapters.AsError(err)
		if ae.Code == adapters.CodeClientRateLimit {
			// Nothing reached the target: the account's own limit had no
			// room for the lookup. The operation waits its turn; this is
			// not a lookup that failed to settle it.
			return verdict{status: adapters.Indeterminate, retryIn: max(ae.RetryAfter, time.Second), code: ae.Code, settling: true,
				note: "lookup held back by the client-side rate limit: " + ae.Code}
		}
		return verdict{status: adapters.Indeterminate, retryIn: max(ae.RetryAfter, time.Second), code: ae.Code,
			note: "lookup failed: " + ae.Code, failed: true}
	}
	switch res.Status {
	case adapters.Found:
		note := "reconciled: found by key"
		if res.Final {
			note = "reconciled: found as a final failure"
		}
		return verdict{status: adapters.Found, outcome: res, note: note, code: res.Code}
	case adapters.NotFound:
		settle := settleFor(a.Capabilities(), callTimeout)
		var since, quiet time.Duration
		err := trailErr
		if err == nil {
			since, quiet, err = tr.sinceNow(ctx, store)
		}
		if err != nil {
			return verdict{status: adapters.Indeterminate, retryIn: max(settle, time.Second), note: "lookup not settled: " + err.Error()}
		}
		if since < settle {
			return verdict{status: adapters.Indeterminate, retryIn: settle - since, settling: true,
				note: fmt.Sprintf("not found yet; the target's search settles after %v", settle)}
		}
		return verdict{status: adapters.NotFound, quietFor: quiet, note: "reconciled: not found by key; retrying with the same key"}
	default:
		return verdict{status: adapters.Indeterminate, retryIn: time.Second, note: "lookup indeterminate"}
	}
}

// completion records what a successful lookup found: the object, or the
// final failure the target reports for the earlier attempt.
func (v verdict) completion(key string, token int64, result json.RawMessage) journal.Completion {
	c := journal.Completion{Key: key, Token: token, Status: journal.StatusSucceeded, Reconciled: true, Note: v.note,
		TargetObjectID: v.outcome.Outcome.ObjectID, Result: result, TargetRequestID: v.outcome.Outcome.RequestID}
	if v.outcome.Final {
		c.Status, c.ErrorCode = journal.StatusFailedFinal, v.outcome.Code
	}
	return c
}

// settleFor is how long after an attempt began a "not found" may count:
// the target's search lag, and for a target that does not deduplicate by our
// key at least a call timeout, since a dead owner's request may still land
// that late and a second create would make a second object.
func settleFor(caps adapters.Capabilities, callTimeout time.Duration) time.Duration {
	if caps.NativeKey {
		return caps.SettleTime
	}
	return max(caps.SettleTime, callTimeout)
}

// trail is what the attempts trail says of the calls made for a key, on
// the database clock.
type trail struct {
	// began is when the last execute attempt began, ended when the last
	// one that ended did (its completion, or the take-over that abandoned
	// it); zero when there is none.
	began, ended time.Time
	// open: an execute attempt has not ended (its call may still run).
	open bool
	// atts is the trail itself.
	atts []journal.Attempt
}

// readTrail reads key's attempts trail.
func readTrail(ctx context.Context, store journal.Store, key string) (trail, error) {
	atts, err := store.Attempts(ctx, key)
	if err != nil {
		return trail{}, err
	}
	t := trail{atts: atts}
	for _, a := range atts {
		if a.Kind != "execute" {
			continue
		}
		if a.StartedAt.After(t.began) {
			t.began = a.StartedAt
		}
		if a.FinishedAt.IsZero() {
			t.open = true
		} else if a.FinishedAt.After(t.ended) {
			t.ended = a.FinishedAt
		}
	}
	return t, nil
}

// until is when every call for the key had ended (adapters.Attempt.Until):
// zero while one is open or when none is known.
func (t trail) until() time.Time {
	if t.open {
		return time.Time{}
	}
	return t.ended
}

// sinceNow is the database-clock time since the last call to the target
// began, and since the last execute attempt ended (zero while one is open).
func (t trail) sinceNow(ctx context.Context, store journal.Store) (began, ended time.Duration, err error) {
	now, err := store.Now(ctx)
	if err != nil {
		return 0, 0, err
	}
	const forever = time.Duration(1<<62 - 1)
	began, ended = forever, forever
	if !t.began.IsZero() {
		began = now.Sub(t.began)
	}
	if !t.ended.IsZero() {
		ended = now.Sub(t.ended)
	}
	if t.open {
		ended = 0
	}
	return began, ended, nil
}

// finalWhenQuiet keeps a "not found" from ending an operation failed_final
// until a call timeout has passed since its last execute attempt ended: an
// owner whose lease was taken over may have sent its request just before
// (a worker never starts a call past its lease), and a target may commit
// it a little later. A retry with the same key is safe at once; a final
// verdict is not. It returns v, or a verdict to look up again after the
// rest of that wait (no round spent).
func finalWhenQuiet(v verdict, final bool, callTimeout time.Duration) verdict {
	if v.status != adapters.NotFound || !final || v.quietFor >= callTimeout {
		return v
	}
	return verdict{status: adapters.Indeterminate, retryIn: callTimeout - v.quietFor, settling: true,
		note: fmt.Sprintf("not found; a final verdict waits %v after the last call ended", callTimeout)}
}

// notFoundIsFinal reports whether a lookup that found nothing ends the
// operation as failed_final rather than retrying it: the intent's retry
// budget is spent (no attempt would start now; used, budget.go: the wait
// for the target's search to settle spends none of it), or the target's
// last answer was final (never_retry) and was only looked up because an
// earlier attempt's outcome was unknown. It returns the note for the trail.
func notFoundIsFinal(p RetryPolicy, rules classifier, rec journal.Record, used budgetUse) (bool, string) {
	if p.exhausted(used.attempts, used.elapsed) {
		return true, "not found by key after the retries ran out: final"
	}
	if rules != nil && rec.ErrorCode != "" && rules[rec.ErrorCode] == adapters.NeverRetry {
		return true, "not found by key: the target's answer " + rec.ErrorCode + " is final"
	}
	return false, ""
}

// reconcile settles an unknown outcome held under a taken-over lease, then
// publishes it, or retries the call with the same key when the target has
// no trace of it and the retry budget allows.
func (w *Worker) reconcile(j *job) {
	adapter := w.d.Adapters[j.op.Type]
	key := j.op.Key.String()
	lease := w.beats.track(j, key, j.claim.Token)
	w.recordTrace(j)
	// The lookup waits for its place in the client-side rate limit, in hand.
	lctx, turnDone := waitTurn(j.traced(lease.ctx), adapter, j.op)
	v := lookup(lctx, w.d.Store, adapter, j.op, j.claim.Record, j.claim.Attempt, w.cfg.CallTimeout)
	turnDone()
	crashpoint.Do(crashpoint.BlindRetry, func() {
		v = verdict{status: adapters.NotFound, quietFor: time.Duration(1<<62 - 1), note: "reconciled: not found by key"}
	})
	w.beats.untrack(lease)
	w.m.reconciled.WithLabelValues(v.result()).Inc()
	rec := j.claim.Record
	used := budgetOf(v.trail, rec, j.age(), settleFor(adapter.Capabilities(), w.cfg.CallTimeout))
	final, finalNote := notFoundIsFinal(w.cfg.Retry, w.rules[adapter.Name()], rec, used)
	v = finalWhenQuiet(v, final, w.cfg.CallTimeout)
	log := w.log.With("operation_key", key, "lease_token", j.claim.Token, "lookup", string(v.status))
	if ids := j.logAttrs(); ids != nil {
		log = log.With(ids...)
	}
	switch v.status {
	case adapters.Found:
		reportDuplicates(w.d, adapter, key, v.outcome.Outcome)
		log.Info(v.note)
		w.completeAndPublish(j, v.completion(key, j.claim.Token, w.outcomeJSON(v.outcome.Outcome)), false)
	case adapters.NotFound:
		if final {
			log.Warn(finalNote, "error_code", rec.ErrorCode)
			w.m.failedFinal.Inc()
			w.completeAndPublish(j, journal.Completion{Key: key, Token: j.claim.Token, Status: journal.StatusFailedFinal,
				Reconciled: true, Note: finalNote, ErrorCode: rec.ErrorCode}, false)
			return
		}
		log.Info(v.note)
		if err := w.commit.Complete(w.work, journal.Completion{Key: key, Token: j.claim.Token, Status: journal.StatusFailedRetryable,
			Reconciled: true, Note: v.note, ErrorCode: rec.ErrorCode}); err != nil {
			w.completionFailed(j, err)
			return
		}
		sent := time.Now()
		c, err := journal.ClaimOne(w.work, w.d.Store, w.claimRequest(j.op))
		if err != nil {
			log.Error("re-claim after reconciliation failed", "error", err.Error())
			w.nak(j, time.Second)
			return
		}
		j.setClaim(c, sent)
		if c.Decision == journal.Execute {
			growStack(0)
			w.execute(j)
			return
		}
		w.dispatch(j)
	default:
		log.Warn("outcome still unknown", "note", v.note)
		delay := v.retryIn
		if !v.settling {
			// Lookups back off between rounds along the retry schedule.
			delay = max(delay, w.cfg.Retry.NextRetry(rec.ReconcileRounds+1))
		}
		if err := w.commit.Complete(w.work, journal.Completion{Key: key, Token: j.claim.Token, Status: journal.StatusUnknown,
			Reconciled: !v.settling, Note: v.note, ErrorCode: rec.ErrorCode, HoldFor: delay}); err != nil {
			w.completionFailed(j, err)
			return
		}
		now := rec
		now.Status, now.AttemptCount = journal.StatusUnknown, j.claim.Attempt
		if !v.settling {
			now.ReconcileRounds++
		}
		w.publishPendingAndNak(j, delay+holdSlack, now)
	}
}

// LookupReport is what LookUp found.
type LookupReport struct {
	// Status is found, not_found (counted only past the target's settle
	// time, as for the reconciler) or indeterminate.
	Status adapters.LookupStatus
	// Outcome is the object found (its duplicates included); Final and
	// Code: the target reports the earlier attempt as a final failure.
	Outcome adapters.Outcome
	Final   bool
	Code    string
	// Note says what the lookup found, as a reconcile round's trail does.
	Note string
}

// LookUp asks a's target now what it holds for rec's key, as a reconcile
// round does (the attempts trail bounds the search, a "not found" counts
// only past the target's settle time, the call is bounded by callTimeout
// and goes through the adapter's own rate limit), for an operator who is
// about to resolve rec. It writes nothing: no round is spent, no lease is
// taken, and an operation it finds is settled by the reconciler or by the
// operator's decision, not by this look.
func LookUp(ctx context.Context, store journal.Store, a adapters.Adapter, rec journal.Record, callTimeout time.Duration) (LookupReport, error) {
	key, err := operation.ParseKey(rec.Key)
	if err != nil {
		return LookupReport{}, fmt.Errorf("stored key: %w", err)
	}
	// The journal keeps no payload: the lookup goes by key only.
	op := operation.Operation{Key: key, EventID: rec.EventID, Type: rec.OperationType, TargetSystem: rec.TargetSystem,
		ApprovalID: rec.ApprovalID, Fingerprint: rec.RequestHash}
	v := lookup(ctx, store, a, op, rec, rec.AttemptCount+1, callTimeout)
	r := LookupReport{Status: v.status, Note: v.note, Code: v.code}
	if v.status == adapters.Found {
		r.Outcome, r.Final, r.Code = v.outcome.Outcome, v.outcome.Final, v.outcome.Code
	}
	return r, nil
}
