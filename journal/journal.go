package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Status is the state of an operation in the journal, exactly the article's.
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
	LeaseUntil   time.Time // zero when no lease
	// ReconcileRounds counts lookups that could not settle an unknown outcome.
	ReconcileRounds int
	CreatedAt       time.Time
	UpdatedAt       time.Time
	CompletedAt     time.Time // zero until terminal
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
	// HoldFor, on an unknown completion, keeps the operation from being taken
	// over (by the reconciler or a redelivery) until it has passed on the
	// database clock: the wait for a target's search to settle, or a backoff
	// between lookups. Zero: at once.
	HoldFor time.Duration
}

// LeaseRef names a lease to extend.
type LeaseRef struct {
	Key   string
	Token int64
}

// Attempt is one entry of the attempts trail.
type Attempt struct {
	Key             string
	Attempt         int
	Token           int64
	Worker          string
	Kind            string // "execute", "reconcile" or "operator"
	StartedAt       time.Time
	FinishedAt      time.Time // zero while running
	Outcome         Status    // empty while running
	ErrorCode       string
	TargetRequestID string
	Note            string
}

// Resolution is an operator's decision on an unknown operation that no lookup
// could settle.
type Resolution struct {
	Key            string
	Status         Status // succeeded or failed_final
	TargetObjectID string
	ErrorCode      string
	Evidence       string
	Operator       string
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
	// Completing twice with the same token and outcome is not an error.
	Complete(ctx context.Context, cs []Completion) ([]error, error)
	// Heartbeat extends live leases by ttl from now (database clock). The result
	// slice aligns with refs: nil or ErrStaleToken per item.
	Heartbeat(ctx context.Context, refs []LeaseRef, ttl time.Duration) ([]error, error)
	// TakeOverStale finds up to limit operations whose outcome is unknown
	// (status unknown with no live lease, or started with an expired lease),
	// locks them with SKIP LOCKED so replicas share the work, and takes each
	// over with a new fencing token.
	TakeOverStale(ctx context.Context, owner string, ttl time.Duration, limit int) ([]Claim, error)
	// Resolve records an operator's decision on an unknown operation with no
	// live lease. Refused (ErrIllegalTransition) for any other status.
	Resolve(ctx context.Context, r Resolution) (Record, error)
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
	// Close releases the store's resources.
	Close()
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
	case c.HoldFor < 0 || (c.HoldFor > 0 && c.Status != StatusUnknown):
		return fmt.Errorf("%w: %s: only an unknown outcome is held, for a positive time", ErrInvalid, c.Key)
	}
	return nil
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
