package gateway

import (
	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// The faces answer by the rules of package answer: one table from a
// journal state (or a refusal) to status, next_action and reason. These
// names are the gateway's spelling of it.

// NextAction is what an agent may do after an answer.
type NextAction = answer.NextAction

// Next actions (answer.NextAction).
const (
	Done              = answer.Done
	Poll              = answer.Poll
	AwaitApproval     = answer.AwaitApproval
	RetrySameIntent   = answer.RetrySameIntent
	FixInput          = answer.FixInput
	NewIntentRequired = answer.NewIntentRequired
	HumanReview       = answer.HumanReview
)

// Answer statuses (answer.Status*).
const (
	StatusSucceeded   = answer.StatusSucceeded
	StatusFailedFinal = answer.StatusFailedFinal
	StatusConflict    = answer.StatusConflict
	StatusRejected    = answer.StatusRejected
	StatusPending     = answer.StatusPending
	StatusUnavailable = answer.StatusUnavailable
	StatusNotFound    = answer.StatusNotFound
)

// Answer is what every face returns for a command or a lookup.
type Answer = answer.Answer

// Step is one entry of an operation's attempts trail.
type Step = answer.Step

// rules are the answers' thresholds (poll_after, review_after, idle_after).
type rules = answer.Thresholds

// CodeKeyPayloadMismatch is the error code of a conflict, as the daemon
// publishes it.
const CodeKeyPayloadMismatch = answer.CodeKeyPayloadMismatch

// resultOf is the result envelope the daemon publishes for a journal row,
// without its words.
func resultOf(rec journal.Record) operation.Result { return answer.ResultOf(rec) }
