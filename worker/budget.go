package worker

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/journal"
)

// What an intent spends of its retry budget (RetryPolicy.MaxAttempts and
// MaxElapsed) is read from its attempts trail, where every copy, delivery
// and replica leaves its attempts. Two kinds of wait are no failure of the
// target and spend nothing:
//
//   - a rate limit's: an execute attempt held back by the account's
//     client-side bucket (client_rate_limited: nothing sent, the worker
//     waited for the call's turn) or refused by the target's own limit
//     before it ran (adapters.Throttled). It is not an attempt, and the
//     time until the next attempt began is not elapsed time;
//   - a lookup's settle time: after an attempt whose answer was lost (its
//     outcome unknown, or abandoned by an owner that died), a "not found"
//     only counts once the target's search has settled (settleFor, from
//     the attempt's start). The time from the attempt's end until then is
//     not elapsed time, so a lost answer without an effect is retried with
//     the same key however long the settle time.
//
// The journal's attempt count and the intent's age bound both from above:
// the trail is read only when they say the budget is spent.

// budgetUse is what an intent has spent of its retry budget.
type budgetUse struct {
	// attempts counts execute attempts that could have reached the
	// target's effect.
	attempts int
	// elapsed is the time since the first execute attempt began, less the
	// waits that spend nothing.
	elapsed time.Duration
}

// budgetUsed is what the trail atts (oldest first) has spent as of now
// (database clock), for a target whose "not found" counts settle after an
// attempt began.
func budgetUsed(atts []journal.Attempt, now time.Time, settle time.Duration) budgetUse {
	var u budgetUse
	var ex []journal.Attempt
	for _, a := range atts {
		if a.Kind == journal.KindExecute {
			ex = append(ex, a)
		}
	}
	if len(ex) == 0 {
		return u
	}
	u.elapsed = now.Sub(ex[0].StartedAt)
	for i, a := range ex {
		next := now
		if i+1 < len(ex) {
			next = ex[i+1].StartedAt
		}
		if throttledAttempt(a) {
			u.elapsed -= max(next.Sub(a.StartedAt), 0)
			continue
		}
		u.attempts++
		if (a.Outcome == journal.OutcomeUnknown || a.Outcome == journal.OutcomeAbandoned) && !a.FinishedAt.IsZero() {
			settled := a.StartedAt.Add(settle)
			if next.Before(settled) {
				settled = next
			}
			u.elapsed -= max(settled.Sub(a.FinishedAt), 0)
		}
	}
	u.elapsed = max(u.elapsed, 0)
	return u
}

// throttledAttempt reports whether an execute attempt ended held back by a
// rate limit: it made no effect and spends no budget.
func throttledAttempt(a journal.Attempt) bool {
	return a.Outcome == journal.OutcomeFailedRetryable && adapters.Throttled(a.ErrorCode)
}

// onlyThrottled reports whether every execute attempt of atts before the
// one under token ended held back by a rate limit: none can have reached
// the target (adapters.Attempt.Fresh).
func onlyThrottled(atts []journal.Attempt, token int64) bool {
	for _, a := range atts {
		if a.Kind == journal.KindExecute && a.Token != token && !throttledAttempt(a) {
			return false
		}
	}
	return true
}

// spentBy reports whether the budget is spent for an attempt that would
// start next after now (database clock): rec's attempt count and the
// intent's age say no at once; otherwise the trail is read. A trail that
// cannot be read leaves the count and the age to decide.
func (p RetryPolicy) spentBy(ctx context.Context, store journal.Store, rec journal.Record, attempts int, age, next, settle time.Duration) (bool, error) {
	if !p.exhausted(attempts, age+next) {
		return false, nil
	}
	atts, err := store.Attempts(ctx, rec.Key)
	if err != nil {
		return true, err
	}
	u := budgetUsed(atts, rec.CreatedAt.Add(age), settle)
	return p.exhausted(u.attempts, u.elapsed+next), nil
}

// budgetOf is what the trail atts (nil: not read) says an intent whose
// journal row is rec, age old, has spent: without a trail, its attempt
// count and its age.
func budgetOf(atts []journal.Attempt, rec journal.Record, age, settle time.Duration) budgetUse {
	if atts == nil {
		return budgetUse{attempts: rec.AttemptCount, elapsed: age}
	}
	return budgetUsed(atts, rec.CreatedAt.Add(age), settle)
}
