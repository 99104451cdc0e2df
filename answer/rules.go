package answer

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// State is what an answer is given for: a journal state (a row's status,
// told apart where the status alone does not say what to do), a process
// state, or one of the faces' refusals. Each has one row in the rules
// table.
type State string

// States of an operation's journal row.
const (
	StateStarted          State = "started"
	StateSucceeded        State = "succeeded"
	StateFailedFinal      State = "failed_final"
	StateCancelled        State = State(CodeCancelled)
	StateApprovalDenied   State = State(journal.ErrorApprovalDenied)
	StateApprovalExpired  State = State(journal.ErrorApprovalExpired)
	StateAwaitingApproval State = State(journal.StatusAwaitingApproval)
	// StateRetrying: failed_retryable, retried with the same key.
	StateRetrying State = "failed_retryable"
	// StateHeldBack: failed_retryable, held back by a rate limit before
	// anything of it ran.
	StateHeldBack State = "failed_retryable/held_back"
	// StateRetryIdle: failed_retryable untouched for idle_after: no
	// delivery is left to retry it (unresolved).
	StateRetryIdle State = "failed_retryable/idle"
	// StateHeldBackIdle: held back, then left idle_after.
	StateHeldBackIdle State = "failed_retryable/held_back/idle"
	// StateUnknown: unknown, being looked up by key.
	StateUnknown State = "unknown"
	// StateNeedsReview: unknown after review_after lookups (unresolved).
	StateNeedsReview State = "unknown/needs_review"
)

// States of a result with no row behind it, and the faces' refusals.
const (
	// StatePending: a pending result (the target is being called or its
	// answer looked up).
	StatePending State = "pending"
	// StateQueued: a command handed to JetStream and not claimed yet.
	StateQueued      State = "queued"
	StateConflict    State = "conflict"
	StateRejected    State = "rejected"
	StateNotRouted   State = State(CodeNotRouted)
	StateUnavailable State = "unavailable"
	StateNotFound    State = "not_found"
)

// States of a process.
const (
	StateProcessRunning      State = "process/running"
	StateProcessCompensating State = "process/compensating"
	StateProcessSucceeded    State = "process/succeeded"
	StateProcessCompensated  State = "process/compensated"
	StateProcessNeedsReview  State = "process/needs_review"
	// A process left for review that a person settled by hand, as
	// succeeded or as compensated.
	StateProcessSettledSucceeded   State = "process/settled_succeeded"
	StateProcessSettledCompensated State = "process/settled_compensated"
)

// Error codes the rules know.
const (
	// CodeCancelled: an operation cancelled before it was sent.
	CodeCancelled = "cancelled_before_sent"
	// CodeKeyPayloadMismatch: a conflict, as the daemon publishes it.
	CodeKeyPayloadMismatch = "idempotency_key_payload_mismatch"
	// CodeNotRouted: a call of an operation type no adapter serves on this
	// deployment.
	CodeNotRouted = "operation_not_routed"
)

// Facts are what a reason is worded from.
type Facts struct {
	Operation, TargetSystem, TargetObjectID, ErrorCode string
	// Rounds is the row's unsettled lookups.
	Rounds int
	// Detail is the state's own words: a rejection's reason, what could not
	// be done (unavailable), a process's story.
	Detail         string
	ConflictFields []string
	Existing       *operation.Existing
}

// Rule is one row of the rules table: what a state answers.
type Rule struct {
	State      State
	Status     string
	NextAction NextAction
	// Wait: the answer's retry_after_ms is the poll interval.
	Wait bool
	// Unresolved: a person or the agent must act (list_unresolved,
	// `idemgate trace --unresolved`, the console's Unresolved page, the
	// metric idemgate_operations_unresolved).
	Unresolved bool
	reason     func(Facts) string
}

// Reason words the rule's reason from the facts.
func (r Rule) Reason(f Facts) string { return r.reason(f) }

func pending(why func(Facts) string) func(Facts) string {
	return func(f Facts) string {
		return fmt.Sprintf("The outcome is not settled yet (%s); %s after retry_after_ms, and never send a changed request for this intent.", why(f), pollWords)
	}
}

func words(s string) func(Facts) string { return func(Facts) string { return s } }

// table is the one rules table: every state, its status, its next action
// and its reason.
var table = []Rule{
	{State: StateSucceeded, Status: StatusSucceeded, NextAction: Done, reason: func(f Facts) string {
		// Concatenated, not Sprintf: every success the daemon publishes
		// words this, and boxing three strings for fmt was a tenth of the
		// result's allocations.
		return f.Operation + " succeeded: " + targetName(f.TargetSystem) + " " + objectName(f.TargetObjectID) +
			" exists for this intent; it was made once, and calling again with this intent_id only returns it."
	}},
	{State: StateFailedFinal, Status: StatusFailedFinal, NextAction: HumanReview, reason: func(f Facts) string {
		return fmt.Sprintf("%s refused %s for good (%s); calling again with this intent_id only repeats this answer, so a person should review it before any new intent is made.",
			targetName(f.TargetSystem), f.Operation, orNone(f.ErrorCode))
	}},
	{State: StateCancelled, Status: StatusFailedFinal, NextAction: NewIntentRequired, reason: func(f Facts) string {
		return fmt.Sprintf("%s was cancelled before anything was sent to %s: nothing was executed, and this intent_id stays cancelled; "+
			"to do it after all, make a new intent (a new intent_id).", f.Operation, targetName(f.TargetSystem))
	}},
	{State: StateApprovalDenied, Status: StatusFailedFinal, NextAction: NewIntentRequired, reason: func(f Facts) string {
		return fmt.Sprintf("A person denied %s: nothing was sent to %s, and this intent_id stays denied; "+
			"to do it after all, make a new intent (a new intent_id) and ask for a new approval.", f.Operation, targetName(f.TargetSystem))
	}},
	{State: StateApprovalExpired, Status: StatusFailedFinal, NextAction: NewIntentRequired, reason: func(f Facts) string {
		return fmt.Sprintf("Nobody approved %s within the approval's wait limit: nothing was sent to %s, and this intent_id stays expired; "+
			"to do it after all, make a new intent (a new intent_id) and ask for a new approval.", f.Operation, targetName(f.TargetSystem))
	}},
	{State: StateConflict, Status: StatusConflict, NextAction: NewIntentRequired, reason: func(f Facts) string {
		return operation.ConflictReason(f.TargetSystem, f.ConflictFields, f.Existing)
	}},
	{State: StateRejected, Status: StatusRejected, NextAction: FixInput, reason: func(f Facts) string {
		return rejectedReason(f.Detail)
	}},
	{State: StateNotRouted, Status: StatusRejected, NextAction: HumanReview, reason: func(f Facts) string {
		return fmt.Sprintf("No adapter serves %s on this deployment (the daemon has no route for it), so nothing was sent and calling again cannot succeed; "+
			"a person must route %s to an adapter (routes: in the configuration) before it can be used.", f.Operation, f.Operation)
	}},
	{State: StateAwaitingApproval, Status: StatusPending, NextAction: AwaitApproval, Wait: true, reason: func(f Facts) string {
		return fmt.Sprintf("%s waits for a person's approval and nothing has executed (the approval URL may be handed to the user); %s after retry_after_ms, "+
			"and never send a changed request for this intent.", f.Operation, pollWords)
	}},
	{State: StateStarted, Status: StatusPending, NextAction: Poll, Wait: true, reason: pending(words("the target is being called under a lease"))},
	{State: StatePending, Status: StatusPending, NextAction: Poll, Wait: true, reason: pending(words("the target is being called or its answer looked up"))},
	{State: StateQueued, Status: StatusPending, NextAction: Poll, Wait: true, reason: pending(words("the command is queued for the daemon"))},
	{State: StateRetrying, Status: StatusPending, NextAction: Poll, Wait: true, reason: pending(func(f Facts) string {
		return fmt.Sprintf("the last attempt failed with a temporary error (%s) and idemgate retries it with the same key", orNone(f.ErrorCode))
	})},
	{State: StateHeldBack, Status: StatusPending, NextAction: Poll, Wait: true, reason: pending(func(f Facts) string {
		return fmt.Sprintf("a rate limit holds the call back (%s); nothing of it has run, and idemgate sends it with the same key when its turn comes", f.ErrorCode)
	})},
	{State: StateRetryIdle, Status: StatusPending, NextAction: RetrySameIntent, Unresolved: true, reason: func(f Facts) string {
		return fmt.Sprintf("the last attempt failed with a temporary error (%s) and no delivery is retrying it; call %s again with the same intent_id and payload — that is safe, the key prevents a second effect.",
			orNone(f.ErrorCode), f.Operation)
	}},
	{State: StateHeldBackIdle, Status: StatusPending, NextAction: RetrySameIntent, Unresolved: true, reason: func(f Facts) string {
		return fmt.Sprintf("the last attempt was never sent or never run: a rate limit held it back (%s) and no delivery is retrying it; call %s again with the same intent_id and payload — that is safe, the key prevents a second effect.",
			f.ErrorCode, f.Operation)
	}},
	{State: StateUnknown, Status: StatusPending, NextAction: Poll, Wait: true,
		reason: pending(words("the target's answer was lost and idemgate is looking the operation up by its key before anything is sent again"))},
	{State: StateNeedsReview, Status: StatusPending, NextAction: HumanReview, Unresolved: true, reason: func(f Facts) string {
		return fmt.Sprintf("%s could not confirm whether %s took effect after %d lookups; a person must check the target and resolve it (idemgate resolve) — do not retry this under a new intent.",
			targetName(f.TargetSystem), f.Operation, f.Rounds)
	}},
	{State: StateUnavailable, Status: StatusUnavailable, NextAction: RetrySameIntent, Wait: true, reason: func(f Facts) string {
		return fmt.Sprintf("idemgate could not %s; calling again with the same intent_id and payload is safe.", f.Detail)
	}},
	{State: StateNotFound, Status: StatusNotFound, NextAction: RetrySameIntent, Wait: true,
		reason: words("idemgate has no record of this operation; if it was sent moments ago it may still be queued, and calling the operation again with the same intent_id and payload is safe.")},
	{State: StateProcessRunning, Status: StatusPending, NextAction: Poll, Wait: true, reason: pending(func(f Facts) string { return "the process is running: " + f.Detail })},
	{State: StateProcessCompensating, Status: StatusPending, NextAction: Poll, Wait: true, reason: pending(func(f Facts) string { return "the process is running: " + f.Detail })},
	{State: StateProcessSucceeded, Status: StatusSucceeded, NextAction: Done, reason: func(f Facts) string {
		return fmt.Sprintf("%s succeeded: every step made its effect once (%s).", f.Operation, f.Detail)
	}},
	{State: StateProcessCompensated, Status: StatusFailedFinal, NextAction: HumanReview, reason: func(f Facts) string {
		return fmt.Sprintf("%s could not complete: %s; the process is consistent. "+
			"Calling again with this intent_id only repeats this answer; a person should review the refusal before any new intent is made.", f.Operation, f.Detail)
	}},
	{State: StateProcessSettledSucceeded, Status: StatusSucceeded, NextAction: Done, reason: func(f Facts) string {
		return fmt.Sprintf("%s was completed by a person: %s. Calling again with this intent_id only repeats this answer.", f.Operation, f.Detail)
	}},
	{State: StateProcessSettledCompensated, Status: StatusFailedFinal, NextAction: HumanReview, reason: func(f Facts) string {
		return fmt.Sprintf("%s did not complete and a person undid what it had done: %s. "+
			"Calling again with this intent_id only repeats this answer; ask a person before any new intent is made.", f.Operation, f.Detail)
	}},
	{State: StateProcessNeedsReview, Status: StatusFailedFinal, NextAction: HumanReview, Unresolved: true, reason: func(f Facts) string {
		return fmt.Sprintf("%s needs a person: %s, so some effects may stand; "+
			"a person must check the targets (idemgate trace KEY) — do not retry this under a new intent.", f.Operation, f.Detail)
	}},
}

var byState = func() map[State]Rule {
	m := make(map[State]Rule, len(table))
	for _, r := range table {
		if _, dup := m[r.State]; dup {
			panic("answer: two rules for " + string(r.State))
		}
		m[r.State] = r
	}
	return m
}()

// Rules returns the rules table, one row per state.
func Rules() []Rule { return append([]Rule(nil), table...) }

// For returns the rule of a state.
func For(s State) Rule {
	r, ok := byState[s]
	if !ok {
		panic("answer: no rule for state " + string(s))
	}
	return r
}

// Thresholds are the answers' settings: how long a pending answer says to
// wait, and when an operation counts as unresolved. Declared once, read by
// the worker, the reconciler, the gateway's faces, trace and the console
// (reconciler.review_after and reconciler.idle_after in the configuration).
type Thresholds struct {
	// PollAfter is the wait of a pending answer. Default 1s.
	PollAfter time.Duration
	// ReviewAfter: an unknown operation with this many unsettled lookups is
	// unresolved: a person must check the target. Default 5.
	ReviewAfter int
	// IdleAfter: a retryable failure untouched this long is unresolved: no
	// delivery is left to retry it, the agent must resend. Default 1h.
	IdleAfter time.Duration
}

// Defaults of Thresholds.
const (
	DefaultPollAfter   = time.Second
	DefaultReviewAfter = 5
	DefaultIdleAfter   = time.Hour
)

// WithDefaults fills zero fields.
func (t Thresholds) WithDefaults() Thresholds {
	if t.PollAfter == 0 {
		t.PollAfter = DefaultPollAfter
	}
	if t.ReviewAfter == 0 {
		t.ReviewAfter = DefaultReviewAfter
	}
	if t.IdleAfter == 0 {
		t.IdleAfter = DefaultIdleAfter
	}
	return t
}

// StateOf is the state of a journal row at now.
func (t Thresholds) StateOf(rec journal.Record, now time.Time) State {
	switch rec.Status {
	case journal.StatusSucceeded:
		return StateSucceeded
	case journal.StatusFailedFinal:
		return finalState(rec.ErrorCode)
	case journal.StatusAwaitingApproval:
		return StateAwaitingApproval
	case journal.StatusStarted:
		return StateStarted
	case journal.StatusUnknown:
		if t.ReviewAfter > 0 && rec.ReconcileRounds >= t.ReviewAfter {
			return StateNeedsReview
		}
		return StateUnknown
	case journal.StatusFailedRetryable:
		idle := t.IdleAfter > 0 && !rec.UpdatedAt.IsZero() && now.Sub(rec.UpdatedAt) >= t.IdleAfter
		switch held := heldBack(rec.ErrorCode); {
		case idle && held:
			return StateHeldBackIdle
		case idle:
			return StateRetryIdle
		case held:
			return StateHeldBack
		}
		return StateRetrying
	}
	return StatePending
}

// finalState tells the failed_final rows apart by their error code.
func finalState(code string) State {
	switch code {
	case CodeCancelled:
		return StateCancelled
	case journal.ErrorApprovalDenied:
		return StateApprovalDenied
	case journal.ErrorApprovalExpired:
		return StateApprovalExpired
	}
	return StateFailedFinal
}

// resultState is the state of a result envelope.
func resultState(res operation.Result) State {
	switch res.Status {
	case operation.ResultSucceeded:
		return StateSucceeded
	case operation.ResultFailedFinal:
		return finalState(res.ErrorCode)
	case operation.ResultConflict:
		return StateConflict
	case operation.ResultRejected:
		return StateRejected
	}
	if res.Approval != nil {
		return StateAwaitingApproval
	}
	return StatePending
}

// Unresolved reports whether a journal row needs a person or the agent:
// an unknown outcome after review_after lookups, or a retryable failure
// idle for idle_after. It is the one definition of "unresolved".
func (t Thresholds) Unresolved(rec journal.Record, now time.Time) bool {
	return For(t.StateOf(rec, now)).Unresolved
}

// Of is the answer for state s with facts f: status, next_action, reason
// and retry_after_ms from the table.
func (t Thresholds) Of(s State, f Facts) Answer {
	r := For(s)
	a := Answer{Status: r.Status, Operation: f.Operation, TargetSystem: f.TargetSystem, TargetObjectID: f.TargetObjectID,
		ErrorCode: f.ErrorCode, NextAction: r.NextAction, Reason: r.reason(f), ConflictFields: f.ConflictFields, Existing: f.Existing}
	if r.Wait {
		a.RetryAfterMS = t.WithDefaults().PollAfter.Milliseconds()
	}
	return a
}

// apply sets a's status, next_action, reason and retry_after_ms by state s.
func (t Thresholds) apply(a *Answer, s State, f Facts) {
	b := t.Of(s, f)
	a.Status, a.NextAction, a.Reason, a.RetryAfterMS = b.Status, b.NextAction, b.Reason, b.RetryAfterMS
}

func factsOf(a Answer) Facts {
	return Facts{Operation: a.Operation, TargetSystem: a.TargetSystem, TargetObjectID: a.TargetObjectID,
		ErrorCode: a.ErrorCode, ConflictFields: a.ConflictFields, Existing: a.Existing}
}

// FromResult is the answer to a command from the daemon's result envelope.
func (t Thresholds) FromResult(res operation.Result) Answer {
	a := Answer{
		Status: string(res.Status), OperationKey: res.OperationKey, Operation: res.Operation,
		Replayed: res.Replayed, TargetSystem: res.TargetSystem, TargetObjectID: res.TargetObjectID,
		ErrorCode: res.ErrorCode, Attempts: res.Attempts, Result: res.Result,
		ConflictFields: res.ConflictFields, Existing: res.Existing, Approval: res.Approval,
	}
	if res.NextAction != "" && res.Reason != "" {
		// The daemon worded it by these rules, from the journal row (an
		// unknown outcome past review, a retry held back): its words stand.
		a.NextAction, a.Reason = NextAction(res.NextAction), res.Reason
		if a.NextAction == Poll || a.NextAction == AwaitApproval || a.Status == StatusUnavailable {
			a.RetryAfterMS = t.WithDefaults().PollAfter.Milliseconds()
		}
		return a
	}
	// A daemon older than next_action on the wire: the rules word it.
	f := factsOf(a)
	s := resultState(res)
	if s == StateRejected {
		f.Detail = res.Reason
	}
	t.apply(&a, s, f)
	return a
}

// FromRecord is the answer for a journal row at now: the result envelope
// the daemon publishes for it, with what only the row knows about an
// outcome still being settled (lookups that could not settle it, a retry
// nobody is delivering).
func (t Thresholds) FromRecord(rec journal.Record, now time.Time) Answer {
	res := ResultOf(rec)
	a := Answer{
		Status: string(res.Status), OperationKey: res.OperationKey, Operation: res.Operation,
		TargetSystem: res.TargetSystem, TargetObjectID: res.TargetObjectID,
		ErrorCode: res.ErrorCode, Attempts: res.Attempts, Result: res.Result, JournalStatus: string(rec.Status),
	}
	f := factsOf(a)
	f.Rounds = rec.ReconcileRounds
	t.apply(&a, t.StateOf(rec, now), f)
	return a
}

// ResultFor is the result envelope the daemon publishes for a journal row:
// its facts, with the next_action and reason every face gives for it.
func (t Thresholds) ResultFor(rec journal.Record, now time.Time) operation.Result {
	return t.FromRecord(rec, now).Envelope(rec.EventID)
}

// Conflict is the answer to a request whose key the journal holds with
// another fingerprint: nothing was executed for it; the row's own outcome
// is the existing one.
func (t Thresholds) Conflict(rec journal.Record, fields []string) Answer {
	a := t.Of(StateConflict, Facts{Operation: rec.OperationType, TargetSystem: rec.TargetSystem, ErrorCode: CodeKeyPayloadMismatch,
		ConflictFields: fields, Existing: ExistingOf(rec)})
	a.OperationKey, a.Attempts, a.TargetObjectID = rec.Key, rec.AttemptCount, ""
	return a
}

// ExistingOf is the outcome of the journal row's request, as a conflict
// tells it.
func ExistingOf(rec journal.Record) *operation.Existing {
	return &operation.Existing{Status: ResultStatus(rec.Status), TargetObjectID: rec.TargetObjectID, ErrorCode: rec.ErrorCode}
}

// Rejected is the answer to a command refused before anything was
// executed; reason names the field and what is wrong with it.
func (t Thresholds) Rejected(key, opType, code, reason string) Answer {
	return Rejected(key, opType, code, reason)
}

// Rejected is the answer to a command (or a call's arguments) refused
// before anything was executed; reason names the field and what is wrong
// with it. Every face words its refusals by it.
func Rejected(key, opType, code, reason string) Answer {
	a := Thresholds{}.Of(StateRejected, Facts{Operation: opType, ErrorCode: code, Detail: reason})
	a.OperationKey = key
	return a
}

// NotRouted is the answer to a call of a registered type no adapter serves
// on this deployment.
func (t Thresholds) NotRouted(key, opType string) Answer {
	a := t.Of(StateNotRouted, Facts{Operation: opType, ErrorCode: CodeNotRouted})
	a.OperationKey = key
	return a
}

// Unavailable is the answer when the command could not be handed over (or
// the journal read): nothing is known to have happened; what says what
// could not be done ("hand the command to JetStream").
func (t Thresholds) Unavailable(key, opType, what string) Answer {
	a := t.Of(StateUnavailable, Facts{Operation: opType, ErrorCode: "unavailable", Detail: what})
	a.OperationKey = key
	return a
}

// NotFound is the answer to a lookup of a key the journal does not hold.
func (t Thresholds) NotFound(key, opType string) Answer {
	a := t.Of(StateNotFound, Facts{Operation: opType, ErrorCode: "not_found"})
	a.OperationKey = key
	return a
}

// Queued is the answer for a command published but not claimed yet.
func (t Thresholds) Queued(key, opType, target string) Answer {
	a := t.Of(StateQueued, Facts{Operation: opType, TargetSystem: target})
	a.OperationKey = key
	return a
}

// ProcessState is the state of a process in status s.
func ProcessState(s journal.ProcessStatus) State {
	switch s {
	case journal.ProcessSucceeded:
		return StateProcessSucceeded
	case journal.ProcessCompensating:
		return StateProcessCompensating
	case journal.ProcessCompensated:
		return StateProcessCompensated
	case journal.ProcessNeedsReview:
		return StateProcessNeedsReview
	}
	return StateProcessRunning
}

// SettledProcessState is the state of a process in status s that a person
// settled after it was left for review (succeeded or compensated).
func SettledProcessState(s journal.ProcessStatus) State {
	if s == journal.ProcessSucceeded {
		return StateProcessSettledSucceeded
	}
	return StateProcessSettledCompensated
}

func rejectedReason(reason string) string {
	reason = strings.TrimPrefix(reason, "rejected command: ")
	if reason == "" {
		reason = "the command is invalid"
	}
	return fmt.Sprintf("Rejected, nothing was executed (%s); fix the input and call again — the same intent_id may be reused.", reason)
}

// heldBack reports whether an error code says a rate limit held the
// attempt back before it ran: the codes of adapters.Throttled (answer does
// not import the adapters; a test keeps the two lists alike).
func heldBack(code string) bool {
	switch code {
	case "client_rate_limited", "target_rate_limited", "http_429":
		return true
	}
	return false
}

// HeldBack reports whether an error code says a rate limit held the
// attempt back before it ran.
func HeldBack(code string) bool { return heldBack(code) }

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
