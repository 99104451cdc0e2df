package answer

import (
	"encoding/json"
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
	// Poll: the outcome is being settled; look the operation up again by
	// its operation_key after retry_after_ms. Never send a changed request.
	Poll NextAction = "poll"
	// AwaitApproval: the intent waits for a person's approval; nothing has
	// executed. Look it up again after retry_after_ms; the approval URL
	// may be handed to the user.
	AwaitApproval NextAction = "await_approval"
	// RetrySameIntent: safe to call the operation again with the same
	// intent_id and payload; the key prevents a second effect.
	RetrySameIntent NextAction = "retry_same_intent"
	// FixInput: the command was rejected before anything was executed; fix
	// the named field and call again (the same intent_id may be reused).
	FixInput NextAction = "fix_input"
	// NewIntentRequired: this intent_id can no longer do the operation
	// (another content, a cancellation, a denied or expired approval). A
	// changed or renewed request is a new intent with a new intent_id (and,
	// for money, a new approval).
	NewIntentRequired NextAction = "new_intent_required"
	// HumanReview: a person must look: an unknown outcome lookups could not
	// settle, or a final refusal from the target.
	HumanReview NextAction = "human_review"
)

// NextActions lists every next action, in the order of the rules table.
func NextActions() []NextAction {
	return []NextAction{Done, Poll, AwaitApproval, RetrySameIntent, FixInput, NewIntentRequired, HumanReview}
}

// Answer statuses: the result statuses (succeeded, failed_final, conflict,
// rejected, pending) plus two of the faces' own.
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

// Answer is what every face returns for a command or a lookup: the NATS
// result's next_action and reason, MCP's structured content (and its
// text), the HTTP API's body, `idemgate trace`, the console. The contract
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
	// Approval is, while the intent waits for a person's approval, the
	// wait: until when, how many approvers, the URL.
	Approval *operation.ApprovalWait `json:"approval,omitempty"`
	// Attempts is how many attempts the target has seen.
	Attempts int `json:"attempts"`
	// Result is the normalised, redacted outcome (business status and safe
	// details).
	Result json.RawMessage `json:"result,omitempty"`
	// JournalStatus is the journal row's status (lookups only): started,
	// succeeded, failed_retryable, failed_final, unknown or
	// awaiting_approval.
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

// pollWords is how a pending reason says to poll; PollBy rewords it for a
// face with a way of its own (a task, a Location header).
const pollWords = "look it up again by its operation_key"

// PollBy returns the answer with its way to poll worded for a face that
// has one of its own: how replaces "look it up again by its operation_key".
func (a Answer) PollBy(how string) Answer {
	a.Reason = strings.Replace(a.Reason, pollWords, how, 1)
	return a
}

// Envelope is the answer as a result envelope carries it: the status and the
// facts of the result, with next_action and reason.
func (a Answer) Envelope(eventID string) operation.Result {
	return operation.Result{OperationKey: a.OperationKey, EventID: eventID, Operation: a.Operation,
		Status: operation.ResultStatus(a.Status), TargetSystem: a.TargetSystem, TargetObjectID: a.TargetObjectID,
		Result: a.Result, ErrorCode: a.ErrorCode, Reason: a.Reason, NextAction: string(a.NextAction),
		Attempts: a.Attempts, Replayed: a.Replayed, ConflictFields: a.ConflictFields, Existing: a.Existing,
		Approval: a.Approval}
}

// ResultStatus is the result status of a journal status: terminal rows as
// they stand, every other status pending.
func ResultStatus(s journal.Status) operation.ResultStatus {
	switch s {
	case journal.StatusSucceeded:
		return operation.ResultSucceeded
	case journal.StatusFailedFinal:
		return operation.ResultFailedFinal
	}
	return operation.ResultPending
}

// ResultOf is the result envelope of a journal row without next_action and
// reason: the facts an answer is built from.
func ResultOf(rec journal.Record) operation.Result {
	return operation.Result{
		OperationKey: rec.Key, EventID: rec.EventID, Operation: rec.OperationType,
		TargetSystem: rec.TargetSystem, TargetObjectID: rec.TargetObjectID, Result: operation.CurrentResult(rec.Result),
		ErrorCode: rec.ErrorCode, Attempts: rec.AttemptCount, Status: ResultStatus(rec.Status),
	}
}
