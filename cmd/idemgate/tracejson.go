package main

import (
	"bytes"
	"encoding/json"
	"io"
	"time"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/process"
)

// trace --json is for other programs, and these types are its contract:
// member names are snake_case, like every other name idemgate shows (log
// keys, result fields, configuration keys), and an absent value — no lease,
// a time not reached yet, an empty code — is null rather than a zero value
// that reads like data ("0001-01-01T00:00:00Z"). Members keep the order of
// the journal's fields. TestTraceJSONContract pins the output byte for byte;
// TestTraceJSONShowsEveryJournalField fails when the journal's types gain a
// field these do not show.

// traceJSON is `trace KEY --json` for an operation.
type traceJSON struct {
	Operation operationJSON `json:"operation"`
	// Answer is what every face answers for the operation.
	Answer   answerJSON    `json:"answer"`
	Attempts []attemptJSON `json:"attempts"`
	// AttemptTraceIDs are the attempts' trace ids by lease token (null when
	// tracing was off).
	AttemptTraceIDs map[int64]string `json:"attempt_trace_ids"`
	// Approval is the intent's approval record with its decisions (null
	// when it never needed one).
	Approval *approvalJSON `json:"approval"`
}

// approvalJSON is a journal.Approval.
type approvalJSON struct {
	Key           nullString     `json:"key"`
	OperationType nullString     `json:"operation_type"`
	RequestHash   nullString     `json:"request_hash"`
	TargetSystem  nullString     `json:"target_system"`
	EventID       nullString     `json:"event_id"`
	RequestedBy   nullString     `json:"requested_by"`
	Display       nullRaw        `json:"display"`
	Approvers     int            `json:"approvers"`
	State         nullString     `json:"state"`
	RequestedAt   nullTime       `json:"requested_at"`
	ExpiresAt     nullTime       `json:"expires_at"`
	DecidedAt     nullTime       `json:"decided_at"`
	ReleasedAt    nullTime       `json:"released_at"`
	Votes         []approvalVote `json:"votes"`
}

// approvalVote is a journal.ApprovalVote.
type approvalVote struct {
	Approver    nullString `json:"approver"`
	Vote        nullString `json:"vote"`
	Reason      nullString `json:"reason"`
	RequestHash nullString `json:"request_hash"`
	At          nullTime   `json:"at"`
	TokenID     nullString `json:"token_id"`
}

// approvalOf is a's JSON, or nil for none.
func approvalOf(a *journal.Approval) *approvalJSON {
	if a == nil {
		return nil
	}
	return &approvalJSON{
		Key: nullString(a.Key), OperationType: nullString(a.OperationType), RequestHash: nullString(a.RequestHash),
		TargetSystem: nullString(a.TargetSystem), EventID: nullString(a.EventID), RequestedBy: nullString(a.RequestedBy),
		Display: nullRaw(a.Display), Approvers: a.Approvers, State: nullString(a.State),
		RequestedAt: nullTime(a.RequestedAt), ExpiresAt: nullTime(a.ExpiresAt), DecidedAt: nullTime(a.DecidedAt),
		ReleasedAt: nullTime(a.ReleasedAt),
		Votes: each(a.Votes, func(v journal.ApprovalVote) approvalVote {
			return approvalVote{Approver: nullString(v.Approver), Vote: nullString(v.Vote), Reason: nullString(v.Reason),
				RequestHash: nullString(v.RequestHash), At: nullTime(v.At), TokenID: nullString(v.TokenID)}
		}),
	}
}

// unresolvedJSON is `trace --unresolved --json`: the unresolved by kind
// (answer.KindUnknown, answer.KindIdleRetry), and the processes left for
// review.
type unresolvedJSON struct {
	Unknown              []operationJSON `json:"unknown"`
	IdleRetry            []operationJSON `json:"idle_retry"`
	ProcessesNeedsReview []processJSON   `json:"processes_needs_review"`
}

// processTraceJSON is `trace KEY --json` for a process.
type processTraceJSON struct {
	Process  processJSON        `json:"process"`
	Steps    []process.StepView `json:"steps"`
	Timeline []timelineEntry    `json:"timeline"`
}

// answerJSON is the answer's status, next action and reason (answer.Answer).
type answerJSON struct {
	Status     string `json:"status"`
	NextAction string `json:"next_action"`
	Reason     string `json:"reason"`
}

func answerOf(a answer.Answer) answerJSON {
	return answerJSON{Status: a.Status, NextAction: string(a.NextAction), Reason: a.Reason}
}

// operationJSON is a journal.Record.
type operationJSON struct {
	Key                  nullString `json:"key"`
	OperationType        nullString `json:"operation_type"`
	RequestHash          nullString `json:"request_hash"`
	Status               nullString `json:"status"`
	TargetSystem         nullString `json:"target_system"`
	TargetObjectID       nullString `json:"target_object_id"`
	Result               nullRaw    `json:"result"`
	ErrorCode            nullString `json:"error_code"`
	AttemptCount         int        `json:"attempt_count"`
	EventID              nullString `json:"event_id"`
	ApprovalID           nullString `json:"approval_id"`
	LeaseOwner           nullString `json:"lease_owner"`
	LeaseToken           int64      `json:"lease_token"`
	LeaseUntil           nullTime   `json:"lease_until"`
	ReconcileRounds      int        `json:"reconcile_rounds"`
	ReconcileRoundsTotal int        `json:"reconcile_rounds_total"`
	RaisedAt             nullTime   `json:"raised_at"`
	EffectPossible       bool       `json:"effect_possible"`
	CreatedAt            nullTime   `json:"created_at"`
	UpdatedAt            nullTime   `json:"updated_at"`
	CompletedAt          nullTime   `json:"completed_at"`
}

func operationOf(r journal.Record) operationJSON {
	return operationJSON{
		Key: nullString(r.Key), OperationType: nullString(r.OperationType), RequestHash: nullString(r.RequestHash),
		Status: nullString(r.Status), TargetSystem: nullString(r.TargetSystem), TargetObjectID: nullString(r.TargetObjectID),
		Result: nullRaw(r.Result), ErrorCode: nullString(r.ErrorCode), AttemptCount: r.AttemptCount,
		EventID: nullString(r.EventID), ApprovalID: nullString(r.ApprovalID),
		LeaseOwner: nullString(r.LeaseOwner), LeaseToken: r.LeaseToken, LeaseUntil: nullTime(r.LeaseUntil),
		ReconcileRounds: r.ReconcileRounds, ReconcileRoundsTotal: r.ReconcileRoundsTotal, RaisedAt: nullTime(r.RaisedAt),
		EffectPossible: r.EffectPossible,
		CreatedAt:      nullTime(r.CreatedAt), UpdatedAt: nullTime(r.UpdatedAt), CompletedAt: nullTime(r.CompletedAt),
	}
}

// attemptJSON is a journal.Attempt.
type attemptJSON struct {
	Key             nullString `json:"key"`
	Attempt         int        `json:"attempt"`
	Token           int64      `json:"token"`
	Worker          nullString `json:"worker"`
	Kind            nullString `json:"kind"`
	StartedAt       nullTime   `json:"started_at"`
	FinishedAt      nullTime   `json:"finished_at"`
	Outcome         nullString `json:"outcome"`
	ErrorCode       nullString `json:"error_code"`
	TargetRequestID nullString `json:"target_request_id"`
	Note            nullString `json:"note"`
}

func attemptOf(a journal.Attempt) attemptJSON {
	return attemptJSON{
		Key: nullString(a.Key), Attempt: a.Attempt, Token: a.Token, Worker: nullString(a.Worker), Kind: nullString(a.Kind),
		StartedAt: nullTime(a.StartedAt), FinishedAt: nullTime(a.FinishedAt), Outcome: nullString(a.Outcome),
		ErrorCode: nullString(a.ErrorCode), TargetRequestID: nullString(a.TargetRequestID), Note: nullString(a.Note),
	}
}

// processJSON is a journal.ProcessRecord.
type processJSON struct {
	Key         nullString `json:"key"`
	Name        nullString `json:"name"`
	RequestHash nullString `json:"request_hash"`
	Digest      nullString `json:"digest"`
	Status      nullString `json:"status"`
	Step        int        `json:"step"`
	FailedStep  nullString `json:"failed_step"`
	ErrorCode   nullString `json:"error_code"`
	EventID     nullString `json:"event_id"`
	ApprovalID  nullString `json:"approval_id"`
	LeaseOwner  nullString `json:"lease_owner"`
	LeaseToken  int64      `json:"lease_token"`
	LeaseUntil  nullTime   `json:"lease_until"`
	CreatedAt   nullTime   `json:"created_at"`
	UpdatedAt   nullTime   `json:"updated_at"`
	CompletedAt nullTime   `json:"completed_at"`
	// An operator's settlement of a process left for review.
	ResolvedBy         nullString `json:"resolved_by"`
	ResolvedAt         nullTime   `json:"resolved_at"`
	ResolutionEvidence nullString `json:"resolution_evidence"`
}

func processOf(p journal.ProcessRecord) processJSON {
	return processJSON{
		Key: nullString(p.Key), Name: nullString(p.Name), RequestHash: nullString(p.RequestHash), Digest: nullString(p.Digest),
		Status: nullString(p.Status), Step: p.Step, FailedStep: nullString(p.FailedStep), ErrorCode: nullString(p.ErrorCode),
		EventID: nullString(p.EventID), ApprovalID: nullString(p.ApprovalID),
		LeaseOwner: nullString(p.LeaseOwner), LeaseToken: p.LeaseToken, LeaseUntil: nullTime(p.LeaseUntil),
		CreatedAt: nullTime(p.CreatedAt), UpdatedAt: nullTime(p.UpdatedAt), CompletedAt: nullTime(p.CompletedAt),
		ResolvedBy: nullString(p.ResolvedBy), ResolvedAt: nullTime(p.ResolvedAt), ResolutionEvidence: nullString(p.ResolutionEvidence),
	}
}

// each maps a list to its JSON form: an empty list is [], never null.
func each[T, J any](in []T, of func(T) J) []J {
	out := make([]J, len(in))
	for i, v := range in {
		out[i] = of(v)
	}
	return out
}

// nullString is a string, null when empty.
type nullString string

func (s nullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// nullTime is a time in UTC (RFC 3339, to the nanosecond), null when zero.
type nullTime time.Time

func (t nullTime) MarshalJSON() ([]byte, error) {
	tm := time.Time(t)
	if tm.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(tm.UTC().Format(time.RFC3339Nano))
}

// nullRaw is JSON kept as it is, null when empty.
type nullRaw json.RawMessage

func (r nullRaw) MarshalJSON() ([]byte, error) {
	if len(bytes.TrimSpace(r)) == 0 {
		return []byte("null"), nil
	}
	return json.RawMessage(r).MarshalJSON()
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
