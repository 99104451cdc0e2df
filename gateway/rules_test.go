package gateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// TestNextActionRules: every outcome record maps to one next_action, and
// the reasons say what the agent may do.
func TestNextActionRules(t *testing.T) {
	r := rules{pollAfter: time.Second, reviewAfter: 5, idleAfter: time.Hour}
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
		{"succeeded", r.fromRecord(rec(journal.StatusSucceeded, func(x *journal.Record) { x.TargetObjectID = "pay_1" }), now),
			StatusSucceeded, Done, false, "object pay_1 exists"},
		{"failed_final", r.fromRecord(rec(journal.StatusFailedFinal, func(x *journal.Record) { x.ErrorCode = "insufficient_funds" }), now),
			StatusFailedFinal, HumanReview, true, "insufficient_funds"},
		{"started", r.fromRecord(rec(journal.StatusStarted, nil), now), StatusPending, Poll, false, "call get_operation"},
		{"unknown, being looked up", r.fromRecord(rec(journal.StatusUnknown, func(x *journal.Record) { x.ReconcileRounds = 4 }), now),
			StatusPending, Poll, false, "looking the operation up by its key"},
		{"unknown past review", r.fromRecord(rec(journal.StatusUnknown, func(x *journal.Record) { x.ReconcileRounds = 5 }), now),
			StatusPending, HumanReview, false, "after 5 lookups; a person must check"},
		{"retryable, retried", r.fromRecord(rec(journal.StatusFailedRetryable, func(x *journal.Record) { x.ErrorCode = "http_503" }), now),
			StatusPending, Poll, false, "http_503"},
		{"retryable, idle", r.fromRecord(rec(journal.StatusFailedRetryable, func(x *journal.Record) { x.UpdatedAt = now.Add(-2 * time.Hour) }), now),
			StatusPending, RetrySameIntent, false, "no delivery is retrying it"},
		{"held back by a rate limit", r.fromRecord(rec(journal.StatusFailedRetryable, func(x *journal.Record) { x.ErrorCode = "client_rate_limited" }), now),
			StatusPending, Poll, false, "nothing of it has run"},
		{"held back until the command expired", r.fromRecord(rec(journal.StatusFailedRetryable, func(x *journal.Record) {
			x.ErrorCode, x.UpdatedAt = "target_rate_limited", now.Add(-2*time.Hour)
		}), now), StatusPending, RetrySameIntent, false, "never sent or never run"},
		{"conflict", r.conflictFrom(rec(journal.StatusSucceeded, nil), []string{"amount_minor", "currency"}),
			StatusConflict, NewIntentRequired, true, "amount_minor and currency differ from the first request for this intent"},
		{"conflict, one field", r.fromResult(operation.Result{Status: operation.ResultConflict, TargetSystem: "crm"}),
			StatusConflict, NewIntentRequired, true, "new intent_id."},
		{"rejected", r.fromResult(operation.Result{Status: operation.ResultRejected, Reason: "rejected command: missing_field: payload.currency: required"}),
			StatusRejected, FixInput, true, "Rejected, nothing was executed (missing_field: payload.currency: required)"},
		{"pending result", r.fromResult(operation.Result{Status: operation.ResultPending}), StatusPending, Poll, false, "retry_after_ms"},
		{"unavailable", r.unavailable("k", "payment.charge", "hand the command to JetStream"), StatusUnavailable, RetrySameIntent, false, "safe"},
		{"not found", r.notFound("k", "payment.charge"), StatusNotFound, RetrySameIntent, false, "no record"},
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
	replayed := r.fromResult(operation.Result{Status: operation.ResultSucceeded, Replayed: true, TargetObjectID: "o", Operation: "invoice.create", TargetSystem: "1c"})
	require.Equal(t, "invoice.create succeeded: 1C object o exists, made earlier for this intent and answered from the stored outcome; nothing was sent again.", replayed.Reason)
}
