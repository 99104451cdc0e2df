package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Status is the state of an operation in the journal (docs/concepts.md).
//
//	started ──────────► succeeded
//	   ├──────────────► failed_final
//	   ├──────────────► failed_retryable ─► started
//	   └─ timeout after send ─► unknown ─► reconcile ─► succeeded
//	                                             └──► failed_retryable
//
// unknown means the external effect may have happened: it is never retried
// blindly, only reconciled (looked up by key) first.
type Status string

// Journal statuses.
const (
	StatusStarted         Status = "started"
	StatusSucceeded       Status = "succeeded"
	StatusFailedRetryable Status = "failed_retryable"
	StatusFailedFinal     Status = "failed_final"
	StatusUnknown         Status = "unknown"
)

// Terminal reports whether s is final (succeeded or failed_final).
func (s Status) Terminal() bool { return s == StatusSucceeded || s == StatusFailedFinal }

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusStarted, StatusSucceeded, StatusFailedRetryable, StatusFailedFinal, StatusUnknown:
		return true
	}
	return false
}

// CanComplete reports whether a lease holder may move an operation from
// status from to status to. started may end in any other status; unknown
// (held by a reconciler) may be resolved or stay unknown.
func CanComplete(from, to Status) bool {
	switch from {
	case StatusStarted:
		return to == StatusSucceeded || to == StatusFailedFinal || to == StatusFailedRetryable || to == StatusUnknown
	case StatusUnknown:
		return to == StatusSucceeded || to == StatusFailedFinal || to == StatusFailedRetryable || to == StatusUnknown
	}
	return false
}

// Decision is what Claim decided for one key.
type Decision string

// Claim decisions.
const (
	// Execute: the caller holds a new lease (new key, or a retryable failure
	// re-claimed) and must call the target, then Complete with Token.
	Execute Decision = "execute"
	// ReplaySucceeded: the operation succeeded earlier; return its stored result.
	ReplaySucceeded Decision = "replay_succeeded"
	// ReplayFailed: the operation failed finally earlier; return its stored error.
	ReplayFailed Decision = "replay_failed"
	// Conflict: the key is known with another request hash; nothing executes.
	Conflict Decision = "conflict"
	// InProgress: another owner holds a live lease; it will publish.
	InProgress Decision = "in_progress"
	// Reconcile: the outcome is unknown (status unknown, or a lease that expired
	// while started). The caller took the lease over with a new Token and must
	// look the operation up in the target before anything else.
	Reconcile Decision = "reconcile"
)

// ClaimRequest asks to own one operation.
type ClaimRequest struct {
	Key           string
	OperationType string
	RequestHash   string
	TargetSystem  string
	EventID       string
	ApprovalID    string
	// Owner identifies the claiming worker (unique per process).
	Owner string
	// LeaseTTL is how long the lease lasts from now on the database clock.
	LeaseTTL time.Duration
	// FieldDigests are the request's per-field digests
	// (operation.Operation.FieldDigests), stored with a new row so that a
	// later conflict can name the fields that differ. Optional.
	FieldDigests string
}

// Validate checks a request before it reaches the database.
func (r ClaimRequest) Validate() error {
	switch {
	case r.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case r.OperationType == "":
		return fmt.Errorf("%w: %s: empty operation type", ErrInvalid, r.Key)
	case r.RequestHash == "":
		return fmt.Errorf("%w: %s: empty request hash", ErrInvalid, r.Key)
	case r.TargetSystem == "":
		return fmt.Errorf("%w: %s: empty target system", ErrInvalid, r.Key)
	case r.Owner == "":
		return fmt.Errorf("%w: %s: empty owner", ErrInvalid, r.Key)
	case r.LeaseTTL < time.Millisecond:
		return fmt.Errorf("%w: %s: lease TTL %v too short", ErrInvalid, r.Key, r.LeaseTTL)
	}
	return nil
}

// Claim is the decision for one ClaimRequest, with the row as it stands.
type Claim struct {
	Decision Decision
	// Token is the fencing token the caller holds (Execute and Reconcile only).
	Token int64
	// Attempt is the attempt number the caller runs (Execute and Reconcile).
	Attempt int
	Record  Record
	// Now is the database clock when the row was read for this decision:
	// the time base for Record's times (a lease's or hold's end, the
	// operation's age), so that callers never compare them with their own
	// clock.
	Now time.Time
}

// Age is how long ago, on the database clock, the operation was first
// claimed: its first attempt began.
func (c Claim) Age() time.Duration { return c.Now.Sub(c.Record.CreatedAt) }

// Wait is how long, on the database clock, the row's lease or hold still
// runs (zero when it has ended or there is none).
func (c Claim) Wait() time.Duration {
	if c.Record.LeaseUntil.IsZero() || !c.Record.LeaseUntil.After(c.Now) {
		return 0
	}
	return c.Record.LeaseUntil.Sub(c.Now)
}

// Owns reports whether the claim gave the caller a lease.
func (c Claim) Owns() bool { return c.Decision == Execute || c.Decision == Reconcile }

// Record is one row of the journal.
type Record struct {
	Key            string
	OperationType  string
	RequestHash    string
	Status         Status
	TargetSystem   string
	TargetObjectID string
	// Result is the normalised result replayed to the agent (never secrets).
	Result       json.RawMessage
	ErrorCode    string
	AttemptCount int
	EventID      string
	ApprovalID   string
	LeaseOwner   string
	LeaseToken   int64
	// LeaseUntil is the end of the lease of a started (or reconciled) row,
	// or of the hold of an unknown or failed_retryable row: nobody acts on
	// the row before it passes on the database clock (for failed_retryable,
	// the next attempt's "not before"). Zero when there is none.
	LeaseUntil time.Time
	// ReconcileRounds counts lookups that could not settle the current
	// unknown outcome; it restarts at 0 once the outcome is settled.
	ReconcileRounds int
	// ReconcileRoundsTotal counts every unsettled lookup the operation ever
	// had: the history ReconcileRounds forgets.
	ReconcileRoundsTotal int
	// RaisedAt is when the operation was first raised for an operator's
	// review (zero if never). It stays after the outcome is settled.
	RaisedAt time.Time
	// EffectPossible is set once an attempt's outcome was unknown (a lost
	// answer, or an owner that died mid-call): the target may hold the
	// object whatever later attempts answered, so the operation is looked up
	// before it may end failed_final.
	EffectPossible bool
	CreatedAt      time.Time
	UpdatedAt      time.Time
	CompletedAt    time.Time // zero until terminal
}

// Completion records the outcome of an attempt under a lease.
type Completion struct {
	Key   string
	Token int64
	// Status is the new status: succeeded, failed_final, failed_retryable or unknown.
	Status         Status
	TargetObjectID string
	Result         json.RawMessage
	ErrorCode      string
	// TargetRequestID is the target's request id, for tracing.
	TargetRequestID string
	// Note is a short safe note for the attempts trail (e.g. "reconciled: found").
	Note string
	// Reconciled marks a completion decided by a lookup; an unknown completion
	// with Reconciled set counts one more unresolved reconcile round.
	Reconciled bool
	// HoldFor keeps the operation from being claimed or taken over until it
	// has passed on the database clock. On an unknown completion: the wait
	// for a target's search to settle, or a backoff between lookups. On a
	// failed_retryable completion: the retry's backoff, the next attempt's
	// "not before" — a copy or redelivery that claims earlier is told
	// InProgress and comes back later, it does not take an attempt. Zero: at
	// once.
	HoldFor time.Duration
}

// LeaseRef names a lease to extend.
type LeaseRef struct {
	Key   string
	Token int64
}

// AttemptOutcome is how one attempt of the trail ended: the status its
// completion recorded, or what became of an attempt that could not record
// one.
type AttemptOutcome string

// Attempt outcomes. The first four are the statuses a completion records.
const (
	OutcomeSucceeded       AttemptOutcome = "succeeded"
	OutcomeFailedRetryable AttemptOutcome = "failed_retryable"
	OutcomeFailedFinal     AttemptOutcome = "failed_final"
	OutcomeUnknown         AttemptOutcome = "unknown"
	// OutcomeFenced: the attempt's worker came back with an outcome after its
	// lease had been taken over; its completion was refused by the fencing
	// token. The note says what the worker found.
	OutcomeFenced AttemptOutcome = "fenced"
	// OutcomeAbandoned: the lease was taken over (an expired lease, or an
	// operator's decision) while the attempt was still open; its worker has
	// not reported since.
	OutcomeAbandoned AttemptOutcome = "abandoned"
)

// Valid reports whether o is one of the attempt outcomes.
func (o AttemptOutcome) Valid() bool {
	switch o {
	case OutcomeSucceeded, OutcomeFailedRetryable, OutcomeFailedFinal, OutcomeUnknown, OutcomeFenced, OutcomeAbandoned:
		return true
	}
	return false
}

// OutcomeOf is the attempt outcome a completion with status s records.
func OutcomeOf(s Status) AttemptOutcome { return AttemptOutcome(s) }

// Attempt is one entry of the attempts trail.
type Attempt struct {
	Key             string
	Attempt         int
	Token           int64
	Worker          string
	Kind            AttemptKind
	StartedAt       time.Time
	FinishedAt      time.Time      // zero while running
	Outcome         AttemptOutcome // empty while running
	ErrorCode       string
	TargetRequestID string
	Note            string
}

// Resolution is an operator's decision on an operation that is not final:
// unknown (held by a reconciler or not), failed_retryable, or started with
// an expired lease (its owner is gone). The decision wins: it takes the
// operation over with a new fencing token, so a reconciler or worker that
// comes back later is refused. A started operation whose execute lease is
// live (a call to the target may be in flight) is refused with ErrLeaseHeld
// unless Force is set: an effect may still land after the decision.
type Resolution struct {
	Key            string
	Status         Status // succeeded or failed_final
	TargetObjectID string
	ErrorCode      string
	Evidence       string
	Operator       string
	// Force takes over even a live execute lease; the trail says so.
	Force bool
}

// Errors. Per-item errors of a batch are returned in the result slice; the
// error return of a batch call is for failures of the whole call.
var (
	// ErrStaleToken: the lease was taken over (or never held): the caller's
	// token is no longer current. The caller must not act further.
	ErrStaleToken = errors.New("journal: stale fencing token")
	// ErrIllegalTransition: the operation is not in a state that allows it.
	ErrIllegalTransition = errors.New("journal: illegal state transition")
	// ErrNotFound: no operation with that key.
	ErrNotFound = errors.New("journal: operation not found")
	// ErrInvalid: a malformed request (empty key, bad status...).
	ErrInvalid = errors.New("journal: invalid request")
	// ErrLeaseHeld: a live execute lease holds the operation (a call to the
	// target may be in flight). It wraps ErrIllegalTransition.
	ErrLeaseHeld = fmt.Errorf("%w: a live execute holds the operation", ErrIllegalTransition)
)

// Store is the operation journal. Every method is safe for concurrent use.
// Batch methods take their whole batch at once, never one round trip per
// key; decisions and fencing are per key, exactly as for a single key.
// (PostgreSQL: a claim first reads the batch with a plain SELECT, which alone
// decides replays, conflicts and live leases without a lock or a write; only
// the keys that may change go on, in one pipelined round trip, to the insert
// and conditional take-over. Measured here, that keeps replays 1.5–4× faster
// than sending every key through the writing statements, at no cost to new
// keys.)
type Store interface {
	// Claim decides, for each request, whether the caller executes, replays,
	// conflicts, waits or reconciles. Duplicate keys in one batch are decided
	// once: the later duplicates see InProgress. Results align with reqs.
	Claim(ctx context.Context, reqs []ClaimRequest) ([]Claim, error)
	// Complete applies outcomes under their fencing tokens. The result slice
	// aligns with cs: nil, ErrStaleToken or ErrIllegalTransition per item.
	// Completing twice with the same token and outcome is not an error. A
	// completion refused for a stale token closes its own attempt as fenced,
	// with a note saying what the worker found, so that the trail keeps it.
	Complete(ctx context.Context, cs []Completion) ([]error, error)
	// Heartbeat extends live leases by ttl from now (database clock). The result
	// slice aligns with refs: nil or ErrStaleToken per item.
	Heartbeat(ctx context.Context, refs []LeaseRef, ttl time.Duration) ([]error, error)
	// TakeOverStale finds up to limit operations whose outcome is unknown
	// (status unknown with no live lease, or started with an expired lease),
	// locks them with SKIP LOCKED so replicas share the work, and takes each
	// over with a new fencing token. Attempts still open under an older token
	// are closed as abandoned (as every take-over does).
	TakeOverStale(ctx context.Context, owner string, ttl time.Duration, limit int) ([]Claim, error)
	// Resolve records an operator's decision (see Resolution) with a new
	// fencing token and closes the attempts it takes over as abandoned.
	// Refused with ErrIllegalTransition for a final operation, with
	// ErrLeaseHeld for a live execute lease unless r.Force.
	Resolve(ctx context.Context, r Resolution) (Record, error)
	// RaiseForReview marks unknown operations as raised for an operator's
	// review (RaisedAt, on the database clock) and returns the keys it
	// marked now: a key already raised, or no longer unknown, is left alone,
	// so that one alert goes out per operation however many replicas ask.
	RaiseForReview(ctx context.Context, keys []string) ([]string, error)
	// Get returns one operation.
	Get(ctx context.Context, key string) (Record, error)
	// Attempts returns an operation's attempts trail, oldest first.
	Attempts(ctx context.Context, key string) ([]Attempt, error)
	// FieldDigests returns the per-field digests stored with the key's first
	// request ("" when none were), or ErrNotFound. Read on conflicts only.
	FieldDigests(ctx context.Context, key string) (string, error)
	// ListUnresolved lists unknown operations with at least minRounds
	// unsettled reconcile rounds, oldest first.
	ListUnresolved(ctx context.Context, minRounds, limit int) ([]Record, error)
	// ListIdleRetryable lists failed_retryable operations nobody has touched
	// for at least idle, oldest first: retries waiting for a command delivery
	// that may no longer come (its redeliveries ran out, or it aged out of
	// the stream). The agent must resend them.
	ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]Record, error)
	// Purge deletes terminal operations (and their attempts) completed before
	// the given time; operationType "" means every type. Never started,
	// failed_retryable or unknown rows. Returns the number of operations removed.
	Purge(ctx context.Context, operationType string, before time.Time) (int64, error)
	// Now returns the database clock.
	Now(ctx context.Context) (time.Time, error)

	// RequestApproval records that an intent waits for a person's approval
	// (see approval.go) and says what becomes of the command: await it,
	// proceed to Claim, or a conflict. A key that already has a log row
	// always proceeds.
	RequestApproval(ctx context.Context, r ApprovalRequest) (Gate, Approval, error)
	// ApproveByToken records the approval a verified pre-signed approval
	// token gives (ApproveByTokenIn) and says what becomes of the command,
	// as RequestApproval does. A refusal (the token's jti approved another
	// intent, the issuer submitted the command) is an error wrapping
	// ErrApprovalRefused, nothing recorded.
	ApproveByToken(ctx context.Context, d TokenDecision) (Gate, Approval, error)
	// DecideApproval records one approver's decision and returns the record
	// as it stands after it; a refused decision returns the record and an
	// error wrapping ErrApprovalRefused (or ErrNotFound), nothing recorded.
	DecideApproval(ctx context.Context, d ApprovalDecision) (Approval, error)
	// Approval returns a key's approval record with its votes, or ErrNotFound.
	Approval(ctx context.Context, key string) (Approval, error)
	// PendingApprovals lists pending approval records (without votes),
	// oldest first.
	PendingApprovals(ctx context.Context, limit int) ([]Approval, error)
	// ExpireApprovals ends up to limit pending approvals whose wait limit
	// has passed (failed_final approval_expired) and returns their keys.
	ExpireApprovals(ctx context.Context, limit int) ([]string, error)
	// ApprovalsToRelease lists decided approval records whose parked
	// command has not been handed back yet, oldest decision first.
	ApprovalsToRelease(ctx context.Context, limit int) ([]Approval, error)
	// MarkReleased records that a decided approval's parked command was
	// handed back.
	MarkReleased(ctx context.Context, key string) error
	// Close releases the store's resources.
	Close()
}

// Repeat decides a later request for a key that an earlier request of the
// same batch already decided (first): one decision per key and batch, but
// each request's own content still counts. A request whose hash differs from
// the row's is a conflict, whatever the first one saw; one that matches the
// row after a first that conflicted is decided on the row as it stands (a
// replay, or in progress: a row that needs a claim comes back by
// redelivery); otherwise it sees what the first saw, a lease the first took
// being in progress.
func Repeat(r ClaimRequest, first Claim) Claim {
	rec := first.Record
	switch {
	case r.RequestHash != rec.RequestHash:
		return Claim{Decision: Conflict, Record: rec, Now: first.Now}
	case first.Decision == Conflict && rec.Status == StatusSucceeded:
		return Claim{Decision: ReplaySucceeded, Record: rec, Now: first.Now}
	case first.Decision == Conflict && rec.Status == StatusFailedFinal:
		return Claim{Decision: ReplayFailed, Record: rec, Now: first.Now}
	case first.Decision == Conflict || first.Owns():
		return Claim{Decision: InProgress, Record: rec, Now: first.Now}
	}
	return first
}

// ClaimOne claims a single key.
func ClaimOne(ctx context.Context, s Store, r ClaimRequest) (Claim, error) {
	cs, err := s.Claim(ctx, []ClaimRequest{r})
	if err != nil {
		return Claim{}, err
	}
	return cs[0], nil
}

// CompleteOne completes a single key.
func CompleteOne(ctx context.Context, s Store, c Completion) error {
	errs, err := s.Complete(ctx, []Completion{c})
	if err != nil {
		return err
	}
	return errs[0]
}

// HeartbeatOne extends a single lease.
func HeartbeatOne(ctx context.Context, s Store, ref LeaseRef, ttl time.Duration) error {
	errs, err := s.Heartbeat(ctx, []LeaseRef{ref}, ttl)
	if err != nil {
		return err
	}
	return errs[0]
}

// Validate checks a completion before it reaches the database.
func (c Completion) Validate() error {
	switch {
	case c.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case c.Token <= 0:
		return fmt.Errorf("%w: %s: no fencing token", ErrInvalid, c.Key)
	case c.Status == StatusStarted || !c.Status.Valid():
		return fmt.Errorf("%w: %s: cannot complete as %q", ErrInvalid, c.Key, c.Status)
	case len(c.Result) > 0 && !json.Valid(c.Result):
		return fmt.Errorf("%w: %s: result is not JSON", ErrInvalid, c.Key)
	case c.HoldFor < 0 || (c.HoldFor > 0 && c.Status != StatusUnknown && c.Status != StatusFailedRetryable):
		return fmt.Errorf("%w: %s: only an unknown or retryable outcome is held, for a positive time", ErrInvalid, c.Key)
	}
	return nil
}

// ResolveRefused explains why a resolution did not apply to rec, the row as
// it stands after the attempt: a final operation (ErrIllegalTransition), or
// a live execute lease (ErrLeaseHeld). Engines share it so that operators
// read the same message from both.
func ResolveRefused(rec Record) error {
	if rec.Status.Terminal() {
		return fmt.Errorf("resolve %s: already final (%s%s): %w", rec.Key, rec.Status, orEmpty(" object ", rec.TargetObjectID), ErrIllegalTransition)
	}
	return fmt.Errorf("resolve %s: worker %s is executing it under a lease until %s (a call to the target may be in flight; "+
		"wait for it to end, or force the decision if that worker is gone): %w",
		rec.Key, rec.LeaseOwner, rec.LeaseUntil.UTC().Format(time.RFC3339), ErrLeaseHeld)
}

func orEmpty(prefix, v string) string {
	if v == "" {
		return ""
	}
	return prefix + v
}

// Validate checks an operator's resolution.
func (r Resolution) Validate() error {
	switch {
	case r.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case r.Status != StatusSucceeded && r.Status != StatusFailedFinal:
		return fmt.Errorf("%w: %s: an operator resolves as succeeded or failed_final, not %q", ErrInvalid, r.Key, r.Status)
	case r.Status == StatusSucceeded && r.TargetObjectID == "":
		return fmt.Errorf("%w: %s: resolving as succeeded needs the target object id", ErrInvalid, r.Key)
	case r.Evidence == "":
		return fmt.Errorf("%w: %s: a resolution needs evidence", ErrInvalid, r.Key)
	case r.Operator == "":
		return fmt.Errorf("%w: %s: a resolution needs the operator's name", ErrInvalid, r.Key)
	}
	return nil
}
