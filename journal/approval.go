package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/redact"
)

// Approvals: an intent that the approval policy gates waits for a person
// before anything executes. Its wait is recorded apart from the operation
// log, in an approval record keyed by the operation key:
//
//	(no log row) ── RequestApproval ──► approval pending        Get: awaiting_approval
//	                                     ├─ enough approvals ──► approved: the next claim inserts the
//	                                     │                        log row as any new key (lease, fencing,
//	                                     │                        lookup before retry), so it executes once
//	                                     ├─ one denial ────────► denied:  log row failed_final approval_denied
//	                                     └─ wait limit passed ─► expired: log row failed_final approval_expired
//
// While it waits there is no log row: no attempt, no lease, no retry budget
// spent, nothing for the reconciler or the janitor. The approval record
// keeps the request (the significant fields' masked display, never free
// text or secrets; who asked; how many distinct approvers it needs; until
// when) and every decision (who, when, why, and the fingerprint it covers).
// A decision and the state it moves the record to are written in one
// transaction with the log row a denial or expiry ends in.

// StatusAwaitingApproval is the status Get reports for an operation whose
// approval is pending: it has no log row yet (see above), and it is never a
// status of one.
const StatusAwaitingApproval Status = "awaiting_approval"

// Error codes of intents that ended without approval. Nothing executed.
const (
	ErrorApprovalDenied  = "approval_denied"
	ErrorApprovalExpired = "approval_expired"
)

// ApprovalState is the state of an approval record.
type ApprovalState string

// Approval states.
const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalDenied   ApprovalState = "denied"
	ApprovalExpired  ApprovalState = "expired"
)

// Vote is what one approver decided.
type Vote string

// Votes.
const (
	VoteApprove Vote = "approve"
	VoteDeny    Vote = "deny"
)

// ApprovalRequest asks for a person's approval of one intent.
type ApprovalRequest struct {
	Key           string
	OperationType string
	RequestHash   string
	TargetSystem  string
	EventID       string
	// RequestedBy names who submitted the command (an agent's token, a
	// webhook source); they can never approve it. "" when unknown.
	RequestedBy string
	// Display is what the approver sees: the significant fields, masked
	// (a JSON object). Never free text or secrets.
	Display json.RawMessage
	// Approvers is the number of distinct approvers needed.
	Approvers int
	// TTL is the wait limit, from now on the database clock.
	TTL time.Duration
}

// Validate checks a request before it reaches the database.
func (r ApprovalRequest) Validate() error {
	switch {
	case r.Key == "" || r.OperationType == "" || r.RequestHash == "" || r.TargetSystem == "":
		return fmt.Errorf("%w: an approval request needs key, operation type, request hash and target", ErrInvalid)
	case r.Approvers < 1 || r.Approvers > 5:
		return fmt.Errorf("%w: %s: %d approvers (1..5)", ErrInvalid, r.Key, r.Approvers)
	case r.TTL < time.Second:
		return fmt.Errorf("%w: %s: approval TTL %v too short", ErrInvalid, r.Key, r.TTL)
	case !json.Valid(r.Display):
		return fmt.Errorf("%w: %s: approval display is not JSON", ErrInvalid, r.Key)
	}
	return nil
}

// ApprovalDecision is one approver's decision.
type ApprovalDecision struct {
	Key      string
	Vote     Vote
	Approver string
	Reason   string
	// RequestHash, when set, is the fingerprint the approver was shown: the
	// decision is refused if the record covers another one.
	RequestHash string
}

// Validate checks a decision before it reaches the database.
func (d ApprovalDecision) Validate() error {
	switch {
	case d.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case d.Vote != VoteApprove && d.Vote != VoteDeny:
		return fmt.Errorf("%w: %s: decision %q: approve or deny", ErrInvalid, d.Key, d.Vote)
	case d.Approver == "":
		return fmt.Errorf("%w: %s: a decision needs the approver's name", ErrInvalid, d.Key)
	case d.Reason == "":
		return fmt.Errorf("%w: %s: a decision needs a reason", ErrInvalid, d.Key)
	case len(d.Reason) > 1000:
		return fmt.Errorf("%w: %s: a reason is at most 1000 bytes", ErrInvalid, d.Key)
	}
	return nil
}

// ApprovalVote is one recorded decision.
type ApprovalVote struct {
	Approver string
	Vote     Vote
	// Reason is the approver's reason, masked as every face masks free text.
	Reason string
	// RequestHash is the fingerprint the decision covers.
	RequestHash string
	At          time.Time
	// TokenID is the jti of the pre-signed approval token that gave the
	// decision (Approver is then the token's issuer); "" for a person's.
	TokenID string
}

// Approval is an approval record with its decisions, oldest first.
type Approval struct {
	Key           string
	OperationType string
	RequestHash   string
	TargetSystem  string
	EventID       string
	RequestedBy   string
	Display       json.RawMessage
	Approvers     int
	State         ApprovalState
	RequestedAt   time.Time
	ExpiresAt     time.Time
	DecidedAt     time.Time // zero while pending
	// ReleasedAt is when the daemon handed the parked command back for its
	// decision to be carried out (zero until then).
	ReleasedAt time.Time
	Votes      []ApprovalVote
}

// Approved counts the distinct approvers who approved.
func (a Approval) Approved() int {
	n := 0
	for _, v := range a.Votes {
		if v.Vote == VoteApprove {
			n++
		}
	}
	return n
}

// Gate is what RequestApproval decided for a command.
type Gate string

// Gates.
const (
	// GateAwait: the approval is pending; nothing executes, the command
	// waits (parked) and its answer is pending / await_approval.
	GateAwait Gate = "await"
	// GateProceed: claim the operation as usual. It was approved (the claim
	// executes it once), or its log row exists already (the claim replays
	// it: a denial, an expiry, an earlier outcome, or a conflict).
	GateProceed Gate = "proceed"
	// GateConflict: the key waits for the approval of another fingerprint;
	// nothing executes.
	GateConflict Gate = "conflict"
)

// Errors of approval decisions. Each wraps ErrApprovalRefused.
var (
	// ErrApprovalRefused: the decision does not apply (twice, after a
	// denial or expiry, a finished operation, another fingerprint).
	ErrApprovalRefused = errors.New("journal: approval refused")
	// ErrSelfApproval: the requester tried to decide their own command.
	ErrSelfApproval = fmt.Errorf("%w: the requester cannot approve their own command", ErrApprovalRefused)
	// ErrTokenReused: an approval token's id (jti) already approved
	// another intent; one token approves one intent.
	ErrTokenReused = fmt.Errorf("%w: the approval token's jti already approved another intent", ErrApprovalRefused)
)

// TokenDecision is the decision a verified pre-signed approval token
// gives for the intent of Request: an approval by Issuer, bound to the
// token's id.
type TokenDecision struct {
	Request ApprovalRequest
	// Issuer is the token's iss (recorded as the approver).
	Issuer string
	// TokenID is the token's jti: one intent per issuer and jti.
	TokenID string
}

// TokenReason is the reason recorded with a token's approval.
const TokenReason = "pre-signed approval token"

// Validate checks a token decision before it reaches the database.
func (d TokenDecision) Validate() error {
	if err := d.Request.Validate(); err != nil {
		return err
	}
	switch {
	case d.Issuer == "" || len(d.Issuer) > 64:
		return fmt.Errorf("%w: %s: a token decision needs its issuer (1..64 bytes)", ErrInvalid, d.Request.Key)
	case d.TokenID == "" || len(d.TokenID) > 128:
		return fmt.Errorf("%w: %s: a token decision needs its jti (1..128 bytes)", ErrInvalid, d.Request.Key)
	}
	return nil
}

// ApprovalRow is an engine's transaction over one approval record: the
// rules below are written once and both engines run them.
type ApprovalRow interface {
	// LogStatus reads the key's log row status, if any.
	LogStatus() (st Status, found bool, err error)
	// Lock reads (PostgreSQL: locks) the key's approval record with its
	// votes.
	Lock() (a Approval, found bool, err error)
	// Insert adds the pending record of r (expires now + r.TTL) unless one
	// exists.
	Insert(r ApprovalRequest) error
	// AddVote records a decision at now under the record's fingerprint.
	AddVote(v ApprovalVote) error
	// SetState moves the record to a decided state at now.
	SetState(st ApprovalState) error
	// EndLog inserts the log row a denial or expiry ends in: failed_final
	// with code, no attempt, completed now.
	EndLog(a Approval, code string) error
	// Expired reports whether a pending record's wait limit has passed on
	// the database clock.
	Expired(a Approval) bool
	// TokenUsedFor reads the key an issuer's token id approved, if any.
	TokenUsedFor(issuer, tokenID string) (key string, found bool, err error)
	// MarkReleased records that the record has no parked command to hand
	// back (its decision is carried out by the command at hand).
	MarkReleased() error
}

// RequestApprovalIn runs RequestApproval's rule in tx: a key with a log
// row proceeds (the claim decides it); otherwise the pending record is
// created if absent, and its state decides.
func RequestApprovalIn(tx ApprovalRow, r ApprovalRequest) (Gate, Approval, error) {
	if _, found, err := tx.LogStatus(); err != nil || found {
		return GateProceed, Approval{}, err
	}
	if err := tx.Insert(r); err != nil {
		return "", Approval{}, fmt.Errorf("insert: %w", err)
	}
	a, found, err := tx.Lock()
	if err != nil {
		return "", Approval{}, err
	}
	if !found {
		return "", Approval{}, fmt.Errorf("approval record of %s vanished", r.Key)
	}
	switch {
	case a.RequestHash != r.RequestHash:
		return GateConflict, a, nil
	case a.State == ApprovalPending:
		return GateAwait, a, nil
	}
	// Approved: the claim executes. Denied or expired: the log row exists
	// (written with the decision) and was seen above — unless purged, when
	// the claim starts afresh as any key past its retention.
	return GateProceed, a, nil
}

// ApproveByTokenIn runs a pre-signed approval token's rule in tx: the
// token's id must not have approved another intent (refused, nothing
// recorded); a key with a log row proceeds (the claim replays it, or finds
// the conflict); otherwise the record is created if absent and the token
// votes as its issuer: enough approvals, the record is approved and the
// command at hand goes on to the claim (nothing parked is released for
// it); a record that needs more approvers keeps waiting. A record for
// another fingerprint is a conflict; a pending record past its wait limit
// is expired (the claim replays approval_expired); the issuer cannot
// approve a command it submitted.
func ApproveByTokenIn(tx ApprovalRow, d TokenDecision) (g Gate, a Approval, refused, err error) {
	r := d.Request
	key, used, err := tx.TokenUsedFor(d.Issuer, d.TokenID)
	if err != nil {
		return "", a, nil, err
	}
	if used && key != r.Key {
		return "", a, fmt.Errorf("%s: %w (%s)", r.Key, ErrTokenReused, key), nil
	}
	if _, found, err := tx.LogStatus(); err != nil || found {
		return GateProceed, a, nil, err
	}
	if err := tx.Insert(r); err != nil {
		return "", a, nil, fmt.Errorf("insert: %w", err)
	}
	a, found, err := tx.Lock()
	if err != nil {
		return "", a, nil, err
	}
	if !found {
		return "", a, nil, fmt.Errorf("approval record of %s vanished", r.Key)
	}
	switch {
	case a.RequestHash != r.RequestHash:
		return GateConflict, a, nil, nil
	case a.State == ApprovalPending && tx.Expired(a):
		if err := expireIn(tx, a); err != nil {
			return "", a, nil, err
		}
		return GateProceed, a, nil, nil
	case a.State != ApprovalPending:
		return GateProceed, a, nil, nil
	case a.RequestedBy != "" && a.RequestedBy == d.Issuer:
		return "", a, fmt.Errorf("%s: %s submitted it: %w", r.Key, d.Issuer, ErrSelfApproval), nil
	}
	for _, v := range a.Votes {
		if v.Approver == d.Issuer {
			// Another copy of the command, with this or another token of
			// the same issuer, voted already.
			return GateAwait, a, nil, nil
		}
	}
	v := ApprovalVote{Approver: d.Issuer, Vote: VoteApprove, Reason: TokenReason, RequestHash: a.RequestHash, TokenID: d.TokenID}
	if err := tx.AddVote(v); err != nil {
		return "", a, nil, fmt.Errorf("vote: %w", err)
	}
	a.Votes = append(a.Votes, v)
	if a.Approved() < a.Approvers {
		a, _, err = tx.Lock()
		return GateAwait, a, nil, err
	}
	if err := tx.SetState(ApprovalApproved); err != nil {
		return "", a, nil, err
	}
	if err := tx.MarkReleased(); err != nil {
		return "", a, nil, err
	}
	a, _, err = tx.Lock()
	return GateProceed, a, nil, err
}

// DecideApprovalIn runs a decision's rule in tx and returns the record as
// it stands after it. refused (wrapping ErrApprovalRefused or ErrNotFound)
// says why a decision did not apply; the transaction still commits, since a
// pending record found past its wait limit is expired on the spot, as the
// sweeper would. Refused: no record and a log row (the operation never
// waited, or finished), no record at all, a decided record, a record past
// its wait limit, another fingerprint, the requester, an approver who
// already decided. The reason is stored masked (redact.String), as an
// operator's resolve evidence is. err is a failure of the transaction.
func DecideApprovalIn(tx ApprovalRow, d ApprovalDecision) (a Approval, refused, err error) {
	a, found, err := tx.Lock()
	if err != nil {
		return Approval{}, nil, err
	}
	if !found {
		st, inLog, err := tx.LogStatus()
		if err != nil {
			return Approval{}, nil, err
		}
		if inLog {
			return Approval{}, fmt.Errorf("%w: %s is not awaiting approval: it is %s", ErrApprovalRefused, d.Key, st), nil
		}
		return Approval{}, fmt.Errorf("%w: %s: no approval was requested", ErrNotFound, d.Key), nil
	}
	if a.State == ApprovalPending && tx.Expired(a) {
		if err := expireIn(tx, a); err != nil {
			return Approval{}, nil, err
		}
		a.State = ApprovalExpired
		return a, fmt.Errorf("%w: %s: the wait for approval ended at %s; the intent is failed_final (%s), a new intent is needed",
			ErrApprovalRefused, d.Key, a.ExpiresAt.UTC().Format(time.RFC3339), ErrorApprovalExpired), nil
	}
	switch a.State {
	case ApprovalApproved:
		return a, fmt.Errorf("%w: %s was already approved (by %s); it executes once", ErrApprovalRefused, d.Key, voters(a)), nil
	case ApprovalDenied:
		return a, fmt.Errorf("%w: %s was denied (by %s); it will not execute, a new intent is needed", ErrApprovalRefused, d.Key, voters(a)), nil
	case ApprovalExpired:
		return a, fmt.Errorf("%w: %s expired waiting for approval; it will not execute, a new intent is needed", ErrApprovalRefused, d.Key), nil
	}
	if d.RequestHash != "" && d.RequestHash != a.RequestHash {
		return a, fmt.Errorf("%w: %s: the request shown (fingerprint %s) is not the one awaiting approval (%s)",
			ErrApprovalRefused, d.Key, short(d.RequestHash), short(a.RequestHash)), nil
	}
	if a.RequestedBy != "" && d.Approver == a.RequestedBy {
		return a, fmt.Errorf("%s: %s submitted it: %w", d.Key, d.Approver, ErrSelfApproval), nil
	}
	for _, v := range a.Votes {
		if v.Approver == d.Approver {
			return a, fmt.Errorf("%w: %s: %s already decided (%s at %s); another approval must come from another person",
				ErrApprovalRefused, d.Key, d.Approver, v.Vote, v.At.UTC().Format(time.RFC3339)), nil
		}
	}
	v := ApprovalVote{Approver: d.Approver, Vote: d.Vote, Reason: redact.String(d.Reason), RequestHash: a.RequestHash}
	if err := tx.AddVote(v); err != nil {
		return a, nil, fmt.Errorf("vote: %w", err)
	}
	a.Votes = append(a.Votes, v)
	switch {
	case d.Vote == VoteDeny:
		if err := tx.SetState(ApprovalDenied); err != nil {
			return a, nil, err
		}
		if err := tx.EndLog(a, ErrorApprovalDenied); err != nil {
			return a, nil, fmt.Errorf("end: %w", err)
		}
	case a.Approved() >= a.Approvers:
		if err := tx.SetState(ApprovalApproved); err != nil {
			return a, nil, err
		}
	}
	a, _, err = tx.Lock()
	return a, nil, err
}

// ExpireApprovalIn expires a pending record whose wait limit has passed;
// it reports whether it did.
func ExpireApprovalIn(tx ApprovalRow) (bool, error) {
	a, found, err := tx.Lock()
	if err != nil || !found || a.State != ApprovalPending || !tx.Expired(a) {
		return false, err
	}
	return true, expireIn(tx, a)
}

func expireIn(tx ApprovalRow, a Approval) error {
	if err := tx.SetState(ApprovalExpired); err != nil {
		return err
	}
	if err := tx.EndLog(a, ErrorApprovalExpired); err != nil {
		return fmt.Errorf("end: %w", err)
	}
	return nil
}

func voters(a Approval) string {
	s := ""
	for _, v := range a.Votes {
		if s != "" {
			s += ", "
		}
		s += v.Approver
	}
	if s == "" {
		return "nobody"
	}
	return s
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// AwaitingRecord is the record Get reports for a pending approval: status
// awaiting_approval, no attempt.
func AwaitingRecord(a Approval) Record {
	return Record{Key: a.Key, OperationType: a.OperationType, RequestHash: a.RequestHash, Status: StatusAwaitingApproval,
		TargetSystem: a.TargetSystem, EventID: a.EventID, CreatedAt: a.RequestedAt, UpdatedAt: a.RequestedAt}
}
