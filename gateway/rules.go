package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// NextAction is what an agent may do after an answer.
type NextAction string

// Next actions. Every answer carries exactly one.
const (
	// Done: the outcome is final and the effect exists; nothing more to do.
	Done NextAction = "done"
	// Poll: the outcome is being settled; call get_operation (GET
	// /v1/operations/{key}) after retry_after_ms. Never send a changed request.
	Poll NextAction = "poll"
	// RetrySameIntent: safe to call the operation again with the same
	// intent_id and payload; the key prevents a second effect.
	RetrySameIntent NextAction = "retry_same_intent"
	// FixInput: the command was rejected before anything was executed; fix
	// the named field and call again (the same intent_id may be reused).
	FixInput NextAction = "fix_input"
	// NewIntentRequired: the intent already exists with other content. A
	// changed request is a new intent with a new intent_id (and, for money, a
	// new approval).
	NewIntentRequired NextAction = "new_intent_required"
	// HumanReview: a person must look: an unknown outcome lookups could not
	// settle, or a final refusal from the target.
	HumanReview NextAction = "human_review"
)

// Answer statuses: the result statuses (succeeded, failed_final, conflict,
// rejected, pending) plus two of the gateway's own.
const (
	StatusSucceeded   = string(operation.ResultSucceeded)
	StatusFailedFinal = string(operation.ResultFailedFinal)
	StatusConflict    = string(operation.ResultConflict)
	StatusRejected    = string(operation.ResultRejected)
	StatusPending     = string(operation.ResultPending)
	// StatusUnavailable: the command could not be handed to JetStream (or
	// the journal could not be read); nothing is known to have happened.
	StatusUnavailable = "unavailable"
	// StatusNotFound: the journal holds no operation with that key.
	StatusNotFound = "not_found"
)

// Answer is what every face returns for a command or a lookup: MCP's
// structured content (and its text), the HTTP API's body. The contract
// members are always present.
type Answer struct {
	// Status is succeeded, failed_final, conflict, rejected, pending,
	// unavailable or not_found.
	Status string `json:"status"`
	// OperationKey is <env>:<operation>:<intent_id>:<key_version>; empty only
	// when no key could be derived.
	OperationKey string `json:"operation_key"`
	// Operation is the operation type, e.g. "payment.charge".
	Operation string `json:"operation,omitempty"`
	// Replayed: this call was answered with an outcome that already existed
	// (the journal's, or another call's for the same intent); nothing was
	// sent to the target for it.
	Replayed bool `json:"replayed"`
	// TargetSystem is the class of target: 1c, crm or payments.
	TargetSystem string `json:"target_system,omitempty"`
	// TargetObjectID names the effect in the target (invoice, task, payment).
	TargetObjectID string `json:"target_object_id"`
	// ErrorCode is the safe, stable error code, "" when none.
	ErrorCode string `json:"error_code"`
	// Reason is one sentence a model can act on.
	Reason string `json:"reason"`
	// RetryAfterMS is how long to wait before polling or retrying, 0 when
	// there is nothing to wait for.
	RetryAfterMS int64 `json:"retry_after_ms"`
	// NextAction is what the agent may do next.
	NextAction NextAction `json:"next_action"`
	// ConflictFields names the significant fields that differ from the first
	// request for this intent (conflict only; never their values).
	ConflictFields []string `json:"conflict_fields,omitempty"`
	// Existing is, for a conflict, the outcome of the intent's first
	// request: its status (succeeded, failed_final, pending) and the object
	// it made. Nothing was executed for the conflicting request, but the
	// first one may well have made its effect (money moved).
	Existing *operation.Existing `json:"existing,omitempty"`
	// Attempts is how many attempts the target has seen.
	Attempts int `json:"attempts"`
	// Result is the normalised, redacted outcome (business status and safe
	// details).
	Result json.RawMessage `json:"result,omitempty"`
	// JournalStatus is the journal row's status (lookups only): started,
	// succeeded, failed_retryable, failed_final or unknown.
	JournalStatus string `json:"journal_status,omitempty"`
	// Trail summarises the attempts (lookups with the trail only), oldest first.
	Trail []Step `json:"trail,omitempty"`
}

// Step is one entry of an operation's attempts trail.
type Step struct {
	Attempt    int       `json:"attempt"`
	Kind       string    `json:"kind"`
	Outcome    string    `json:"outcome,omitempty"`
	ErrorCode  string    `json:"error_code,omitempty"`
	Note       string    `json:"note,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// IsError reports whether the answer is an error for the caller (MCP's
// isError): rejected, conflict and failed_final.
func (a Answer) IsError() bool {
	switch a.Status {
	case StatusRejected, StatusConflict, StatusFailedFinal:
		return true
	}
	return false
}

// Final reports whether the outcome cannot change any more.
func (a Answer) Final() bool {
	switch a.Status {
	case StatusSucceeded, StatusFailedFinal, StatusConflict, StatusRejected:
		return true
	}
	return false
}

// rules holds what the next_action rules need beyond the outcome record.
type rules struct {
	// pollAfter is the wait of a pending answer.
	pollAfter time.Duration
	// reviewAfter: an unknown operation with this many unsettled lookups
	// needs a person.
	reviewAfter int
	// idleAfter: a retryable failure untouched this long has no delivery
	// left to retry it; the agent must resend.
	idleAfter time.Duration
}

// fromResult builds the answer to a command from the daemon's result
// envelope.
func (r rules) fromResult(res operation.Result) Answer {
	a := Answer{
		Status: string(res.Status), OperationKey: res.OperationKey, Operation: res.Operation,
		Replayed: res.Replayed, TargetSystem: res.TargetSystem, TargetObjectID: res.TargetObjectID,
		ErrorCode: res.ErrorCode, Attempts: res.Attempts, Result: res.Result,
		ConflictFields: res.ConflictFields, Existing: res.Existing,
	}
	switch res.Status {
	case operation.ResultSucceeded:
		r.succeeded(&a)
	case operation.ResultFailedFinal:
		r.failedFinal(&a)
	case operation.ResultConflict:
		r.conflict(&a)
	case operation.ResultRejected:
		a.NextAction = FixInput
		a.Reason = rejectedReason(res.Reason)
	default:
		a.Status = StatusPending
		r.pending(&a, "the target is being called or its answer looked up")
	}
	return a
}

// resultOf is the result envelope the daemon publishes for a journal row,
// the same mapping its replays use: terminal rows as they stand, every
// other status pending.
func resultOf(rec journal.Record) operation.Result {
	res := operation.Result{
		OperationKey: rec.Key, EventID: rec.EventID, Operation: rec.OperationType,
		TargetSystem: rec.TargetSystem, TargetObjectID: rec.TargetObjectID, Result: operation.CurrentResult(rec.Result),
		ErrorCode: rec.ErrorCode, Attempts: rec.AttemptCount,
	}
	switch rec.Status {
	case journal.StatusSucceeded:
		res.Status = operation.ResultSucceeded
	case journal.StatusFailedFinal:
		res.Status = operation.ResultFailedFinal
	default:
		res.Status = operation.ResultPending
	}
	return res
}

// fromRecord builds the answer from the journal row: the result envelope
// the daemon would publish for it, with what only the row knows about an
// outcome still being settled (lookups that could not settle it, a retry
// nobody is delivering).
func (r rules) fromRecord(rec journal.Record, now time.Time) Answer {
	a := r.fromResult(resultOf(rec))
	a.JournalStatus = string(rec.Status)
	switch rec.Status {
	case journal.StatusStarted:
		r.pending(&a, "the target is being called under a lease")
	case journal.StatusUnknown:
		if r.reviewAfter > 0 && rec.ReconcileRounds >= r.reviewAfter {
			a.NextAction = HumanReview
			a.RetryAfterMS = 0
			a.Reason = fmt.Sprintf("%s could not confirm whether %s took effect after %d lookups; a person must check the target and resolve it (idemgate resolve) — do not retry this under a new intent.",
				targetName(a.TargetSystem), a.Operation, rec.ReconcileRounds)
			return a
		}
		r.pending(&a, "the target's answer was lost and idemgate is looking the operation up by its key before anything is sent again")
	case journal.StatusFailedRetryable:
		held := heldBack(rec.ErrorCode)
		if r.idleAfter > 0 && !rec.UpdatedAt.IsZero() && now.Sub(rec.UpdatedAt) >= r.idleAfter {
			a.NextAction = RetrySameIntent
			a.RetryAfterMS = 0
			what := fmt.Sprintf("the last attempt failed with a temporary error (%s)", orNone(a.ErrorCode))
			if held {
				what = fmt.Sprintf("the last attempt was never sent or never run: a rate limit held it back (%s)", a.ErrorCode)
			}
			a.Reason = fmt.Sprintf("%s and no delivery is retrying it; call %s again with the same intent_id and payload — that is safe, the key prevents a second effect.",
				what, a.Operation)
			return a
		}
		if held {
			r.pending(&a, fmt.Sprintf("a rate limit holds the call back (%s); nothing of it has run, and idemgate sends it with the same key when its turn comes", a.ErrorCode))
			return a
		}
		r.pending(&a, fmt.Sprintf("the last attempt failed with a temporary error (%s) and idemgate retries it with the same key", orNone(a.ErrorCode)))
	}
	return a
}

// heldBack reports whether an error code says a rate limit held the
// attempt back before it ran: the codes of adapters.Throttled (the gateway
// does not import the adapters; a test keeps the two lists alike).
func heldBack(code string) bool {
	switch code {
	case "client_rate_limited", "target_rate_limited", "http_429":
		return true
	}
	return false
}

// conflictFrom is the answer to a request whose key the journal holds with
// another fingerprint: nothing was executed for it; the row's own outcome
// is the existing one.
func (r rules) conflictFrom(rec journal.Record, fields []string) Answer {
	a := Answer{Status: StatusConflict, OperationKey: rec.Key, Operation: rec.OperationType,
		TargetSystem: rec.TargetSystem, ErrorCode: CodeKeyPayloadMismatch, Attempts: rec.AttemptCount,
		ConflictFields: fields, Existing: &operation.Existing{Status: resultOf(rec).Status, TargetObjectID: rec.TargetObjectID, ErrorCode: rec.ErrorCode}}
	r.conflict(&a)
	return a
}

// CodeKeyPayloadMismatch is the error code of a conflict, as the daemon
// publishes it.
const CodeKeyPayloadMismatch = "idempotency_key_payload_mismatch"

func (r rules) succeeded(a *Answer) {
	a.NextAction = Done
	a.RetryAfterMS = 0
	how := "made once for this intent"
	if a.Replayed {
		how = "made earlier for this intent and answered from the stored outcome; nothing was sent again"
	}
	a.Reason = fmt.Sprintf("%s succeeded: %s %s exists, %s.", a.Operation, targetName(a.TargetSystem), objectName(a.TargetObjectID), how)
}

func (r rules) failedFinal(a *Answer) {
	a.RetryAfterMS = 0
	if a.ErrorCode == CodeCancelled {
		a.NextAction = NewIntentRequired
		a.Reason = fmt.Sprintf("%s was cancelled before anything was sent to %s: nothing was executed, and this intent_id stays cancelled; "+
			"to do it after all, make a new intent (a new intent_id).", a.Operation, targetName(a.TargetSystem))
		return
	}
	a.NextAction = HumanReview
	a.Reason = fmt.Sprintf("%s refused %s for good (%s); calling again with this intent_id only repeats this answer, so a person should review it before any new intent is made.",
		targetName(a.TargetSystem), a.Operation, orNone(a.ErrorCode))
}

func (r rules) conflict(a *Answer) {
	a.NextAction = NewIntentRequired
	a.RetryAfterMS = 0
	a.Reason = operation.ConflictReason(a.TargetSystem, a.ConflictFields, a.Existing)
}

func (r rules) pending(a *Answer, why string) {
	a.Status = StatusPending
	a.NextAction = Poll
	a.RetryAfterMS = r.pollAfter.Milliseconds()
	a.Reason = fmt.Sprintf("The outcome is not settled yet (%s); %s after retry_after_ms, and never send a changed request for this intent.", why, pollMCP)
}

// pollMCP is how a pending answer says to poll, in MCP's words (its
// get_operation tool); PollBy words it for another face.
const pollMCP = "call get_operation with this operation_key"

// PollBy returns the answer with its way to poll worded for a face that has
// no get_operation tool: how replaces "call get_operation with this
// operation_key" (the HTTP API says "GET /v1/operations/{key}").
func (a Answer) PollBy(how string) Answer {
	a.Reason = strings.Replace(a.Reason, pollMCP, how, 1)
	return a
}

// unavailable is the answer when the command could not be handed over (or
// the journal read): nothing is known to have happened, and the same call
// is safe to repeat.
func (r rules) unavailable(key, opType, what string) Answer {
	return Answer{Status: StatusUnavailable, OperationKey: key, Operation: opType,
		ErrorCode: "unavailable", NextAction: RetrySameIntent, RetryAfterMS: r.pollAfter.Milliseconds(),
		Reason: fmt.Sprintf("idemgate could not %s; calling again with the same intent_id and payload is safe.", what)}
}

// notFound is the answer to a lookup of a key the journal does not hold.
func (r rules) notFound(key, opType string) Answer {
	return Answer{Status: StatusNotFound, OperationKey: key, Operation: opType,
		ErrorCode: "not_found", NextAction: RetrySameIntent, RetryAfterMS: r.pollAfter.Milliseconds(),
		Reason: "idemgate has no record of this operation; if it was sent moments ago it may still be queued, and calling the operation again with the same intent_id and payload is safe."}
}

// rejected is the answer to a command refused before anything was executed.
func (r rules) rejected(key, opType, code, reason string) Answer {
	return Answer{Status: StatusRejected, OperationKey: key, Operation: opType, ErrorCode: code,
		NextAction: FixInput, Reason: rejectedReason(reason)}
}

func rejectedReason(reason string) string {
	reason = strings.TrimPrefix(reason, "rejected command: ")
	if reason == "" {
		reason = "the command is invalid"
	}
	return fmt.Sprintf("Rejected, nothing was executed (%s); fix the input and call again — the same intent_id may be reused.", reason)
}

func targetName(system string) string {
	switch system {
	case "1c":
		return "1C"
	case "crm":
		return "the CRM"
	case "payments":
		return "the payment provider"
	case "":
		return "the target"
	}
	return system
}

func objectName(id string) string {
	if id == "" {
		return "the object"
	}
	return "object " + id
}

func orNone(code string) string {
	if code == "" {
		return "no error code"
	}
	return code
}
