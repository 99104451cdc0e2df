package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/redact"
)

// ProcessStatus is the state of a business process in the journal.
//
//	running ──────────────► succeeded
//	   │  (a step failed finally)
//	   └──► compensating ──► compensated
//	            │  (a compensation failed finally)
//	            └──────────► needs_review
//	running ──────────────► needs_review   (a step's key holds another request)
//
// A process's steps and compensations are ordinary operations (their own
// rows, keys derived from the process's); the process row records which one
// is current and who coordinates it, under a lease with a fencing token
// like an operation's.
type ProcessStatus string

// Process statuses.
const (
	ProcessRunning      ProcessStatus = "running"
	ProcessSucceeded    ProcessStatus = "succeeded"
	ProcessCompensating ProcessStatus = "compensating"
	ProcessCompensated  ProcessStatus = "compensated"
	ProcessNeedsReview  ProcessStatus = "needs_review"
)

// Valid reports whether s is one of the process statuses.
func (s ProcessStatus) Valid() bool {
	switch s {
	case ProcessRunning, ProcessSucceeded, ProcessCompensating, ProcessCompensated, ProcessNeedsReview:
		return true
	}
	return false
}

// AtRest reports whether nothing more runs for a process in status s on
// its own: succeeded and compensated are final, needs_review waits for a
// person.
func (s ProcessStatus) AtRest() bool {
	return s == ProcessSucceeded || s == ProcessCompensated || s == ProcessNeedsReview
}

// Final reports whether s is succeeded or compensated.
func (s ProcessStatus) Final() bool { return s == ProcessSucceeded || s == ProcessCompensated }

// CanAdvance reports whether a lease holder may move a process at step
// from (status from) to step to (status to): forward steps only go
// forward, compensations only back (newest first), and a process leaves
// running for compensating, succeeded or needs_review, and compensating
// for compensated or needs_review.
//
// A process whose first step failed has nothing to compensate: it goes
// from running to compensated at once. Compensated always ends at step -1.
func CanAdvance(from ProcessStatus, fromStep int, to ProcessStatus, toStep int) bool {
	switch from {
	case ProcessRunning:
		switch to {
		case ProcessRunning, ProcessSucceeded:
			return toStep >= fromStep
		case ProcessCompensating:
			return toStep >= 0 && toStep < fromStep
		case ProcessCompensated:
			return toStep == -1
		case ProcessNeedsReview:
			return true
		}
	case ProcessCompensating:
		switch to {
		case ProcessCompensating:
			return toStep >= 0 && toStep <= fromStep
		case ProcessCompensated:
			return toStep == -1
		case ProcessNeedsReview:
			return true
		}
	}
	return false
}

// CheckAdvance decides p against the row as it stands (engines share it):
// applied when the row already holds exactly p under p's token (an earlier
// call whose commit seemed to fail), else nil to apply it, ErrStaleToken
// for a token that is not the row's, ErrIllegalTransition for a move
// CanAdvance refuses.
func CheckAdvance(rec ProcessRecord, p ProcessProgress) (applied bool, err error) {
	switch {
	case rec.LeaseToken != p.Token:
		return false, fmt.Errorf("advance process %s: %w", p.Key, ErrStaleToken)
	case rec.Status == p.Status && rec.Step == p.Step && rec.FailedStep == p.FailedStep && rec.ErrorCode == p.ErrorCode:
		return true, nil
	case !CanAdvance(rec.Status, rec.Step, p.Status, p.Step):
		return false, fmt.Errorf("advance process %s from %s (step %d) to %s (step %d): %w",
			p.Key, rec.Status, rec.Step, p.Status, p.Step, ErrIllegalTransition)
	}
	return false, nil
}

// CheckLease explains why a heartbeat or release of the process under
// token did not apply to rec: a stale token, or a process at rest.
func CheckLease(rec ProcessRecord, token int64) error {
	if rec.LeaseToken != token {
		return fmt.Errorf("process %s: %w", rec.Key, ErrStaleToken)
	}
	return fmt.Errorf("process %s is %s: %w", rec.Key, rec.Status, ErrIllegalTransition)
}

// ProcessClaimRequest asks to coordinate one process.
type ProcessClaimRequest struct {
	Key string
	// Name is the process's name ("order.checkout").
	Name        string
	RequestHash string
	// Digest identifies the definition a new process starts on; a process
	// already recorded keeps its own.
	Digest     string
	EventID    string
	ApprovalID string
	Owner      string
	LeaseTTL   time.Duration
}

// Validate checks a request before it reaches the database.
func (r ProcessClaimRequest) Validate() error {
	switch {
	case r.Key == "":
		return fmt.Errorf("%w: empty process key", ErrInvalid)
	case r.Name == "" || r.RequestHash == "" || r.Digest == "":
		return fmt.Errorf("%w: %s: a process claim needs its name, request hash and definition digest", ErrInvalid, r.Key)
	case r.Owner == "":
		return fmt.Errorf("%w: %s: empty owner", ErrInvalid, r.Key)
	case r.LeaseTTL < time.Millisecond:
		return fmt.Errorf("%w: %s: lease TTL %v too short", ErrInvalid, r.Key, r.LeaseTTL)
	}
	return nil
}

// ProcessDecision is what ClaimProcess decided.
type ProcessDecision string

// Process claim decisions.
const (
	// ProcessRun: the caller coordinates the process (a new one, or one
	// whose coordinator is gone: its lease expired or was released) under
	// Token, from the step the record names.
	ProcessRun ProcessDecision = "run"
	// ProcessBusy: another coordinator holds a live lease.
	ProcessBusy ProcessDecision = "busy"
	// ProcessReplay: the process is at rest; answer with the record.
	ProcessReplay ProcessDecision = "replay"
	// ProcessConflict: the key is known with another request hash.
	ProcessConflict ProcessDecision = "conflict"
)

// ProcessClaim is the decision for one ProcessClaimRequest.
type ProcessClaim struct {
	Decision ProcessDecision
	// Token is the fencing token the caller holds (ProcessRun only).
	Token int64
	// Resumed: the process was already recorded; the caller takes it over.
	Resumed bool
	Record  ProcessRecord
	Now     time.Time
}

// ProcessRecord is one process row. It holds no payload value: the input
// waits in JetStream with the process command, the steps' results are
// their own rows.
type ProcessRecord struct {
	Key         string
	Name        string
	RequestHash string
	// Digest identifies the definition the process runs on.
	Digest string
	Status ProcessStatus
	// Step is the index of the current step: running, the step to run or
	// await; compensating, the step whose compensation runs (newest first);
	// -1 once every compensation is done.
	Step int
	// FailedStep names the step whose final failure started the
	// compensations, or whose compensation failed (needs_review).
	FailedStep string
	// ErrorCode is the safe code of that failure.
	ErrorCode  string
	EventID    string
	ApprovalID string
	LeaseOwner string
	LeaseToken int64
	// LeaseUntil is the end of the coordinator's lease (zero when released).
	LeaseUntil  time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time // zero until at rest
	// ResolvedBy, ResolvedAt and ResolutionEvidence record an operator's
	// settlement of a process that was left for review (ResolveProcess);
	// empty otherwise.
	ResolvedBy         string
	ResolvedAt         time.Time
	ResolutionEvidence string
}

// Resolved reports whether an operator settled the process.
func (r ProcessRecord) Resolved() bool { return r.ResolvedBy != "" }

// ProcessResolution is an operator's settlement of a process left for
// review (needs_review): a person put the targets right by hand and records
// what the process now nets to — succeeded (what it was for is done) or
// compensated (what it did is undone) — and why. Nothing is sent to a
// target: the resolution records what a person did.
type ProcessResolution struct {
	Key      string
	Status   ProcessStatus // succeeded or compensated
	Evidence string
	Operator string
}

// Limits of a resolution's text, as the journal keeps it.
const (
	MaxOperatorLen = 200
	MaxEvidenceLen = 2000
)

// Masked is r with its evidence masked as every note the journal keeps
// (redact.String: a card number keeps its first six and last four digits,
// secrets become [REDACTED]); the stores keep this.
func (r ProcessResolution) Masked() ProcessResolution {
	r.Evidence = redact.String(r.Evidence)
	return r
}

// Validate checks a resolution before it reaches the database.
func (r ProcessResolution) Validate() error {
	switch {
	case r.Key == "":
		return fmt.Errorf("%w: empty process key", ErrInvalid)
	case r.Status != ProcessSucceeded && r.Status != ProcessCompensated:
		return fmt.Errorf("%w: %s: an operator settles a process as succeeded or compensated, not %q", ErrInvalid, r.Key, r.Status)
	case r.Evidence == "":
		return fmt.Errorf("%w: %s: a resolution needs evidence: what was done in the targets", ErrInvalid, r.Key)
	case len(r.Evidence) > MaxEvidenceLen:
		return fmt.Errorf("%w: %s: evidence of %d bytes, at most %d", ErrInvalid, r.Key, len(r.Evidence), MaxEvidenceLen)
	case r.Operator == "":
		return fmt.Errorf("%w: %s: a resolution needs the operator's name", ErrInvalid, r.Key)
	case len(r.Operator) > MaxOperatorLen:
		return fmt.Errorf("%w: %s: operator name of %d bytes, at most %d", ErrInvalid, r.Key, len(r.Operator), MaxOperatorLen)
	}
	return nil
}

// CheckResolve decides r against the row as it stands (engines share it):
// applied when the row already holds exactly this resolution (an earlier
// call whose commit seemed to fail), else nil to apply it, or
// ErrIllegalTransition for a process that is not needs_review — a running
// process has a coordinator, one at rest needs no person.
func CheckResolve(rec ProcessRecord, r ProcessResolution) (applied bool, err error) {
	switch {
	case rec.Resolved() && rec.Status == r.Status && rec.ResolvedBy == r.Operator && rec.ResolutionEvidence == r.Evidence:
		return true, nil
	case rec.Status != ProcessNeedsReview:
		return false, fmt.Errorf("resolve process %s: it is %s, only a process left for review (needs_review) is settled by a person: %w",
			rec.Key, rec.Status, ErrIllegalTransition)
	}
	return false, nil
}

// ProcessProgress moves a process on, under its fencing token.
type ProcessProgress struct {
	Key        string
	Token      int64
	Status     ProcessStatus
	Step       int
	FailedStep string
	ErrorCode  string
}

// Validate checks a progress before it reaches the database.
func (p ProcessProgress) Validate() error {
	switch {
	case p.Key == "":
		return fmt.Errorf("%w: empty process key", ErrInvalid)
	case p.Token <= 0:
		return fmt.Errorf("%w: %s: no fencing token", ErrInvalid, p.Key)
	case !p.Status.Valid():
		return fmt.Errorf("%w: %s: unknown process status %q", ErrInvalid, p.Key, p.Status)
	case p.Step < -1:
		return fmt.Errorf("%w: %s: step %d", ErrInvalid, p.Key, p.Step)
	}
	return nil
}

// ProcessDefinition is a process declaration the journal keeps by digest,
// so that a running process finishes on the definition it started with
// whatever the configuration says later.
type ProcessDefinition struct {
	Digest    string
	Name      string
	Body      []byte
	CreatedAt time.Time
}

// ProcessStore is the journal's process side. Both engines implement it
// beside Store; every write that changes a process carries its fencing
// token, as for operations.
type ProcessStore interface {
	// ClaimProcess records a new process (running, step 0, under a lease)
	// or decides on the recorded one: replay at rest, conflict for another
	// request hash, busy under another coordinator's live lease, otherwise
	// taken over with a new token.
	ClaimProcess(ctx context.Context, r ProcessClaimRequest) (ProcessClaim, error)
	// AdvanceProcess applies p under its token (ErrStaleToken when taken
	// over, ErrIllegalTransition for a move CanAdvance refuses) and returns
	// the record. Applying the same progress twice is not an error.
	AdvanceProcess(ctx context.Context, p ProcessProgress) (ProcessRecord, error)
	// HeartbeatProcess extends the lease by ttl from now (database clock).
	HeartbeatProcess(ctx context.Context, key string, token int64, ttl time.Duration) error
	// ReleaseProcess ends the lease now, keeping the token: the next
	// delivery (any coordinator) takes the process over at once.
	ReleaseProcess(ctx context.Context, key string, token int64) error
	// GetProcess returns one process, or ErrNotFound.
	GetProcess(ctx context.Context, key string) (ProcessRecord, error)
	// ListProcesses lists processes in the given statuses, oldest first.
	ListProcesses(ctx context.Context, statuses []ProcessStatus, limit int) ([]ProcessRecord, error)
	// SaveDefinition keeps a definition under its digest; one already
	// kept is left as it is.
	SaveDefinition(ctx context.Context, d ProcessDefinition) error
	// Definition returns the definition kept under digest, or ErrNotFound.
	Definition(ctx context.Context, digest string) (ProcessDefinition, error)
	// ResolveProcess records an operator's settlement of a needs_review
	// process (see ProcessResolution) with a new fencing token; the process
	// is then at rest in r.Status, resolved. Refused with
	// ErrIllegalTransition for any other status, ErrNotFound for no such
	// process. Resolving again with the same decision is not an error.
	ResolveProcess(ctx context.Context, r ProcessResolution) (ProcessRecord, error)
	// PurgeProcesses deletes succeeded and compensated processes that came
	// to rest before the given time; never a running, compensating or
	// needs_review one (nor a definition). Returns how many it deleted.
	// Their steps' rows are operations, purged by Purge.
	PurgeProcesses(ctx context.Context, before time.Time) (int64, error)
}

// DecideProcess is the decision on an existing process row for r, on the
// database clock now (engines share it): conflict, replay, busy, or run
// (the caller then takes the row over).
func DecideProcess(r ProcessClaimRequest, rec ProcessRecord, now time.Time) ProcessDecision {
	switch {
	case rec.RequestHash != r.RequestHash:
		return ProcessConflict
	case rec.Status.AtRest():
		return ProcessReplay
	case !rec.LeaseUntil.IsZero() && rec.LeaseUntil.After(now):
		return ProcessBusy
	}
	return ProcessRun
}
