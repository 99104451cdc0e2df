package operation

import (
	"encoding/json"
	"time"
)

// Operation is a decoded, validated and normalised command: what the worker
// claims in the journal and what an adapter executes. It never holds transport
// fields (attempt numbers, send times, trace ids).
type Operation struct {
	// Key is the operation key: <env>:<operation>:<intent_id>:<key_version>.
	Key Key
	// EventID is the stable ID of the event or intent that produced the command.
	EventID string
	// Type is the registered operation type, e.g. "payment.charge".
	Type string
	// TargetSystem is the class of target the type acts on: "1c", "crm" or "payments".
	TargetSystem string
	// ApprovalID is the caller's optional reference for its own approval
	// process (Command.ApprovalID): stored and traced, never trusted as an
	// approval.
	ApprovalID string
	// ApprovalToken is the command's pre-signed approval token
	// (Command.ApprovalToken), "" when none: verified by the worker, never
	// fingerprinted, stored or logged.
	ApprovalToken string
	// Fields are the significant fields, normalised: strings, int64 money in
	// minor units, upper-case currency, times as time.Time in UTC.
	Fields map[string]any
	// Extra are the insignificant fields of a declared type (Field.Insignificant,
	// free text among them), normalised the same way but not fingerprinted:
	// for the target only, never for a result or a log. Nil when none.
	Extra map[string]any
	// Fingerprint is the hex SHA-256 of the RFC 8785 form of the significant fields
	// plus {"operation": Type}.
	Fingerprint string
	// ReplyTo is the reply subject of the command message, if any.
	ReplyTo string
}

// String returns a significant string field, or "" when absent.
func (o Operation) String(field string) string {
	s, _ := o.Fields[field].(string)
	return s
}

// Value returns a field's normalised value, significant (Fields) or not
// (Extra); ok is false when the operation has no such field.
func (o Operation) Value(field string) (v any, ok bool) {
	if v, ok = o.Fields[field]; ok {
		return v, true
	}
	v, ok = o.Extra[field]
	return v, ok
}

// Int returns a significant integer field (money in minor units), or 0 when absent.
func (o Operation) Int(field string) int64 {
	n, _ := o.Fields[field].(int64)
	return n
}

// Time returns a significant time field in UTC, or the zero time when absent.
func (o Operation) Time(field string) time.Time {
	t, _ := o.Fields[field].(time.Time)
	return t
}

// ResultStatus is the status of a published result.
type ResultStatus string

// Result statuses, as published on idemgate.res.<operation>.
const (
	ResultSucceeded   ResultStatus = "succeeded"
	ResultFailedFinal ResultStatus = "failed_final"
	ResultConflict    ResultStatus = "conflict"
	ResultRejected    ResultStatus = "rejected"
	ResultPending     ResultStatus = "pending"
)

// Result is the result envelope published for every command.
type Result struct {
	OperationKey   string          `json:"operation_key"`
	EventID        string          `json:"event_id"`
	Operation      string          `json:"operation,omitempty"`
	Status         ResultStatus    `json:"status"`
	TargetSystem   string          `json:"target_system,omitempty"`
	TargetObjectID string          `json:"target_object_id,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	ErrorCode      string          `json:"error_code,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	// NextAction is what the agent may do next (done, poll, await_approval,
	// retry_same_intent, fix_input, new_intent_required, human_review): the
	// same as every face says for this outcome. Absent from the results of
	// older daemons.
	NextAction string `json:"next_action,omitempty"`
	Attempts   int    `json:"attempts"`
	Replayed   bool   `json:"replayed"`
	// CommandSeq is, on a rejected result, the command's sequence in the
	// commands stream: the one handle on a command no key could be derived
	// for.
	CommandSeq uint64 `json:"command_seq,omitempty"`
	// ConflictFields names, for a conflict, the significant fields that
	// differ from the key's first request (never their values).
	ConflictFields []string `json:"conflict_fields,omitempty"`
	// Existing is, for a conflict, the outcome of the key's first request
	// (its status and the object it made), so that nobody takes the
	// conflict for "nothing happened".
	Existing *Existing `json:"existing,omitempty"`
	// Approval is set on a pending result whose intent waits for a
	// person's approval: nothing has executed; the agent polls
	// get_operation and may hand the URL to its user.
	Approval *ApprovalWait `json:"approval,omitempty"`
}
