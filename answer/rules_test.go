package answer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	. "github.com/idemgate/idemgate/answer"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// TestNextActionRules: every outcome record maps to one next_action, and
// the reasons say what the agent may do.
func TestNextActionRules(t *testing.T) {
	r := Thresholds{PollAfter: time.Second, ReviewAfter: 5, IdleAfter: time.Hour}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := func(s journal.Status, mod func(*journal.Record)) journal.Record {
		x := journal.Record{Key: "test:payment.charge:i:v1", OperationType: "payment.charge", Status: s,
			TargetSystem: "payments", UpdatedAt: now.Add(-time.Minute), AttemptCount: 1}
		if mod != nil {
			mod(&x)
		}
		return x
	}
	cases := []struct {
		name    string
		got     Answer
		status  string
		next    NextAction
		isError bool
		reason  string
	}{
		{"succeeded", r.FromRecord(rec(journal.StatusSucceeded, func(x *journal.Record) { x.TargetObjectID = "pay_1" }), now),
			StatusSucceeded, Done, false, "object pay_1 exists"},
		{"failed_final", r.FromRecord(rec(journal.StatusFailedFinal, func(x *journal.Record) { x.ErrorCode = "insufficient_funds" }), now),
			StatusFailedFinal, HumanReview, true, "insufficient_funds"},
		{"started", r.FromRecord(rec(journal.StatusStarted, nil), now), StatusPending, Poll, false, "look it up again by its operation_key"},
		{"unknown, being looked up", r.FromRecord(rec(journal.StatusUnknown, func(x *journal.Record) { x.ReconcileRounds = 4 }), now),
			StatusPending, Poll, false, "looking the operation up by its key"},
		{"unknown past review", r.FromRecord(rec(journal.StatusUnknown, func(x *journal.Record) { x.ReconcileRounds = 5 }), now),
			StatusPending, HumanReview, false, "after 5 lookups; a person must check"},
		{"retryable, retried", r.FromRecord(rec(journal.StatusFailedRetryable, func(x *journal.Record) { x.ErrorCode = "http_503" }), now),
			StatusPending, Poll, false, "http_503"},
		{"retryable, idle", r.FromRecord(rec(journal.StatusFailedRetryable, func(x *journal.Record) { x.UpdatedAt = now.Add(-2 * time.Hour) }), now),
			StatusPending, RetrySameIntent, false, "no delivery is retrying it"},
		{"held back by a rate limit", r.FromRecord(rec(journal.StatusFailedRetryable, func(x *journal.Record) { x.ErrorCode = "client_rate_limited" }), now),
			StatusPending, Poll, false, "nothing of it has run"},
		{"held back until the command expired", r.FromRecord(rec(journal.StatusFailedRetryable, func(x *journal.Record) {
			x.ErrorCode, x.UpdatedAt = "target_rate_limited", now.Add(-2*time.Hour)
		}), now), StatusPending, RetrySameIntent, false, "never sent or never run"},
		{"conflict", r.Conflict(rec(journal.StatusSucceeded, nil), []string{"amount_minor", "currency"}),
			StatusConflict, NewIntentRequired, true, "amount_minor and currency differ from the first request for this intent"},
		{"conflict, one field", r.FromResult(operation.Result{Status: operation.ResultConflict, TargetSystem: "crm"}),
			StatusConflict, NewIntentRequired, true, "new intent_id."},
		{"rejected", r.FromResult(operation.Result{Status: operation.ResultRejected, Reason: "rejected command: missing_field: payload.currency: required"}),
			StatusRejected, FixInput, true, "Rejected, nothing was executed (missing_field: payload.currency: required)"},
		{"pending result", r.FromResult(operation.Result{Status: operation.ResultPending}), StatusPending, Poll, false, "retry_after_ms"},
		{"unavailable", r.Unavailable("k", "payment.charge", "hand the command to JetStream"), StatusUnavailable, RetrySameIntent, false, "safe"},
		{"not found", r.NotFound("k", "payment.charge"), StatusNotFound, RetrySameIntent, false, "no record"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.status, tc.got.Status)
			require.Equal(t, tc.next, tc.got.NextAction)
			require.Equal(t, tc.isError, tc.got.IsError())
			require.Contains(t, tc.got.Reason, tc.reason)
			if tc.next == Poll {
				require.Equal(t, int64(1000), tc.got.RetryAfterMS)
			}
		})
	}
	replayed := r.FromResult(operation.Result{Status: operation.ResultSucceeded, Replayed: true, TargetObjectID: "o", Operation: "invoice.create", TargetSystem: "1c"})
	fresh := r.FromResult(operation.Result{Status: operation.ResultSucceeded, TargetObjectID: "o", Operation: "invoice.create", TargetSystem: "1c"})
	require.Equal(t, "invoice.create succeeded: 1C object o exists for this intent; it was made once, and calling again with this intent_id only returns it.", replayed.Reason)
	require.Equal(t, fresh.Reason, replayed.Reason, "a replay tells the same story; replayed says it was one")
}

// TestHeldBackCodesAreTheAdapters: the codes the answers call "held back by
// a rate limit" are exactly those the worker spends no retry budget on.
func TestHeldBackCodesAreTheAdapters(t *testing.T) {
	for _, code := range []string{adapters.CodeClientRateLimit, adapters.CodeTargetRateLimit, adapters.CodeHTTP429,
		adapters.CodeHTTP503, adapters.CodeHTTP502, adapters.CodeConnectionRefused, adapters.CodeTimeoutAfterRequestSent, ""} {
		require.Equal(t, adapters.Throttled(code), HeldBack(code), code)
	}
}

// TestEveryJournalStateHasItsRule: every status a journal row (or Get) can
// have, and each error code that changes what to do, lands on a rule of
// the table, and each rule's answer is whole: a status, a next action, a
// reason, a wait exactly when the agent is told to poll.
func TestEveryJournalStateHasItsRule(t *testing.T) {
	th := Thresholds{}.WithDefaults()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	want := map[State]bool{}
	for _, c := range []struct {
		status journal.Status
		code   string
		rounds int
		age    time.Duration
		state  State
		next   NextAction
	}{
		{journal.StatusStarted, "", 0, 0, StateStarted, Poll},
		{journal.StatusSucceeded, "", 0, 0, StateSucceeded, Done},
		{journal.StatusFailedFinal, "declined", 0, 0, StateFailedFinal, HumanReview},
		{journal.StatusFailedFinal, CodeCancelled, 0, 0, StateCancelled, NewIntentRequired},
		{journal.StatusFailedFinal, journal.ErrorApprovalDenied, 0, 0, StateApprovalDenied, NewIntentRequired},
		{journal.StatusFailedFinal, journal.ErrorApprovalExpired, 0, 0, StateApprovalExpired, NewIntentRequired},
		{journal.StatusAwaitingApproval, "", 0, 0, StateAwaitingApproval, AwaitApproval},
		{journal.StatusFailedRetryable, "http_503", 0, time.Minute, StateRetrying, Poll},
		{journal.StatusFailedRetryable, "http_429", 0, time.Minute, StateHeldBack, Poll},
		{journal.StatusFailedRetryable, "http_503", 0, 2 * time.Hour, StateRetryIdle, RetrySameIntent},
		{journal.StatusFailedRetryable, "http_429", 0, 2 * time.Hour, StateHeldBackIdle, RetrySameIntent},
		{journal.StatusUnknown, "timeout_after_request_sent", 4, 0, StateUnknown, Poll},
		{journal.StatusUnknown, "timeout_after_request_sent", 5, 0, StateNeedsReview, HumanReview},
	} {
		rec := journal.Record{Key: "test:payment.charge:i:v1", OperationType: "payment.charge", TargetSystem: "payments",
			Status: c.status, ErrorCode: c.code, ReconcileRounds: c.rounds, UpdatedAt: now.Add(-c.age)}
		require.Equal(t, c.state, th.StateOf(rec, now), "%+v", c)
		a := th.FromRecord(rec, now)
		require.Equal(t, c.next, a.NextAction, "%s", c.state)
		require.Equal(t, For(c.state).Unresolved, th.Unresolved(rec, now))
		// The result the daemon publishes for the row reads back as the
		// same answer on a face that only sees the result.
		back := th.FromResult(th.ResultFor(rec, now))
		require.Equal(t, [3]string{a.Status, string(a.NextAction), a.Reason}, [3]string{back.Status, string(back.NextAction), back.Reason}, "%s", c.state)
		want[c.state] = true
	}
	for _, s := range []journal.ProcessStatus{journal.ProcessRunning, journal.ProcessSucceeded, journal.ProcessCompensating,
		journal.ProcessCompensated, journal.ProcessNeedsReview} {
		require.True(t, s.Valid())
		want[ProcessState(s)] = true
	}
	for _, s := range []journal.ProcessStatus{journal.ProcessSucceeded, journal.ProcessCompensated} {
		want[SettledProcessState(s)] = true
	}
	for _, r := range Rules() {
		a := th.Of(r.State, Facts{Operation: "payment.charge", TargetSystem: "payments", ErrorCode: "x", Detail: "d"})
		require.NotEmpty(t, a.Status, r.State)
		require.Contains(t, NextActions(), a.NextAction, r.State)
		require.NotEmpty(t, a.Reason, r.State)
		require.Equal(t, r.Wait, a.RetryAfterMS > 0, "%s: a wait exactly when there is one", r.State)
		switch r.State {
		case StatePending, StateQueued, StateConflict, StateRejected, StateNotRouted, StateUnavailable, StateNotFound:
			continue // no journal row behind it
		}
		require.True(t, want[r.State], "%s: a journal state the test above covers", r.State)
	}
}
