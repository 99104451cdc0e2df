package journal

import (
	"fmt"
	"time"

	"github.com/idemgate/idemgate/redact"
)

// The rules both engines apply, written once. An engine reads or writes rows
// its own way (one pipelined statement per step in PostgreSQL, a write
// transaction in SQLite) and asks these functions what the rows mean; the
// conformance suite (journaltest) checks that both answer alike.

// AttemptKind is what an attempt of the trail did: call the target, look the
// operation up in it, or record an operator's decision.
type AttemptKind string

// Attempt kinds, as the trail stores them.
const (
	// KindExecute: a worker called the target (a new key, or a retryable
	// failure claimed again).
	KindExecute AttemptKind = "execute"
	// KindReconcile: a worker or the reconciler took an unknown outcome or an
	// expired lease over and looks the operation up in the target first.
	KindReconcile AttemptKind = "reconcile"
	// KindOperator: an operator's Resolution.
	KindOperator AttemptKind = "operator"
)

// Valid reports whether k is one of the attempt kinds.
func (k AttemptKind) Valid() bool {
	return k == KindExecute || k == KindReconcile || k == KindOperator
}

// AttemptKind is the kind of the attempt a claim that gives a lease opens:
// execute for Execute, reconcile for Reconcile, "" for a decision that takes
// no lease.
func (d Decision) AttemptKind() AttemptKind {
	switch d {
	case Execute:
		return KindExecute
	case Reconcile:
		return KindReconcile
	}
	return ""
}

// DecideExisting decides a claim r of a key whose row rec exists, where
// leaseLive says whether the row's lease or hold is live on the database
// clock. settled is false when the row is claimable (a retryable failure
// whose hold has passed, an unknown outcome nobody holds, a started row
// whose lease expired): only a take-over may decide it, and TakeOver says
// what it decides. Otherwise: another request hash is a Conflict, a final
// row a replay, and a live lease or hold InProgress (for a retryable
// failure, the next attempt is not due yet).
func DecideExisting(r *ClaimRequest, rec *Record, leaseLive bool) (d Decision, settled bool) {
	if rec.RequestHash != r.RequestHash {
		return Conflict, true
	}
	switch rec.Status {
	case StatusSucceeded:
		return ReplaySucceeded, true
	case StatusFailedFinal:
		return ReplayFailed, true
	case StatusStarted, StatusUnknown, StatusFailedRetryable:
		if leaseLive {
			return InProgress, true
		}
	}
	return InProgress, false
}

// TakeOver is what a claim decides when it takes over a claimable row (see
// DecideExisting) that had status from: a retryable failure is a new attempt
// (Execute, the attempt count goes up, the row is started again); an unknown
// outcome or an expired lease is looked up first (Reconcile, same status and
// attempt, and the effect is possible from now on).
func TakeOver(from Status) Decision {
	if from == StatusFailedRetryable {
		return Execute
	}
	return Reconcile
}

// CompletionRow is what a completion that did not apply finds when it reads
// its row again.
type CompletionRow struct {
	Found  bool
	Status Status
	Token  int64 // the row's current fencing token
}

// Recorded reports whether the row shows c's outcome under c's token for
// good: it left the states a lease holder may complete from, so a repeat of
// the completion (an earlier call whose commit seemed to fail) is no error.
func (row CompletionRow) Recorded(c *Completion) bool {
	return row.Found && row.Token == c.Token && row.Status == c.Status &&
		(row.Status.Terminal() || row.Status == StatusFailedRetryable)
}

// Open reports whether c could still apply to the row: its token is current,
// the transition is legal and the outcome is not recorded yet. A completion
// statement that failed (and may or may not have committed) while an item
// is still open fails the whole call; sending it again is safe.
func (row CompletionRow) Open(c *Completion) bool {
	return row.Found && row.Token == c.Token && !row.Recorded(c) && CanComplete(row.Status, c.Status)
}

// NotApplied explains a completion c that the journal did not apply, from
// its row as it stands: ErrNotFound, ErrStaleToken (the lease was taken
// over), nil (the outcome is already recorded under c's token), or
// ErrIllegalTransition.
func NotApplied(c *Completion, row CompletionRow) error {
	switch {
	case !row.Found:
		return fmt.Errorf("complete %s: %w", c.Key, ErrNotFound)
	case row.Token != c.Token:
		return fmt.Errorf("complete %s with token %d (current %d): %w", c.Key, c.Token, row.Token, ErrStaleToken)
	case row.Recorded(c):
		return nil
	}
	return fmt.Errorf("complete %s from %s to %s: %w", c.Key, row.Status, c.Status, ErrIllegalTransition)
}

// Applies reports whether resolution r takes over a row with status st,
// where liveExecute says that a started row's live lease belongs to an open
// execute attempt (a call to the target may be in flight): never a final
// row, and a live execute only when forced. A resolution that does not apply
// is answered with ResolveRefused.
func (r Resolution) Applies(st Status, liveExecute bool) bool {
	return !st.Terminal() && (!liveExecute || r.Force)
}

// TrailNote is the note an applied resolution leaves in the attempts trail:
// the operator's evidence, masked as every face masks free text
// (redact.String: a card number keeps its first six and last four digits,
// tokens and other secrets become "[REDACTED]"), and, when it was forced
// over a live execute, whose. An operator pasting what the target showed
// (a card number, an API key) never puts it into the journal.
func (r Resolution) TrailNote(liveExecute bool, owner string) string {
	note := redact.String(r.Evidence)
	if !liveExecute {
		return note
	}
	return note + " [forced over the live execute of " + owner + "]"
}

// ClaimFailed wraps the error of a claim batch that failed. Its commit may
// have applied after all: the leases it took stay with an owner that does
// not know their tokens, expire, and are reconciled (looked up in the
// target) before anything executes again, so the safe answer is an error
// and a later redelivery.
func ClaimFailed(err error) error {
	return fmt.Errorf("claim (leases it may have taken will expire and be reconciled): %w", err)
}

// ValidateHeartbeat checks a heartbeat's TTL before it reaches the database.
func ValidateHeartbeat(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: heartbeat TTL %v too short", ErrInvalid, ttl)
	}
	return nil
}

// LeaseLost is the per-item error of a heartbeat whose lease is no longer
// held with ref's token.
func LeaseLost(ref LeaseRef) error {
	return fmt.Errorf("heartbeat %s with token %d: %w", ref.Key, ref.Token, ErrStaleToken)
}

// ValidateTakeOver checks the reconciler's take-over request.
func ValidateTakeOver(owner string, ttl time.Duration, limit int) error {
	if owner == "" || ttl < time.Millisecond || limit <= 0 {
		return fmt.Errorf("%w: take-over needs an owner, a TTL and a limit", ErrInvalid)
	}
	return nil
}

// ListLimit is the number of rows a list returns for a requested limit: 100
// when none (zero or less) is given.
func ListLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return limit
}

// InOrder returns the keys that marked holds, in the order of keys, each
// once: the keys a statement returned, in the caller's order.
func InOrder(keys []string, marked map[string]bool) []string {
	out := make([]string, 0, len(marked))
	for _, k := range keys {
		if marked[k] {
			out = append(out, k)
			delete(marked, k)
		}
	}
	return out
}
