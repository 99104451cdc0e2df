package operation_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
)

// TestConflictReasonSaysWhatTheFirstRequestDid: a conflict names the
// fields that differ and says what became of the first request — where
// money moved, that it moved, and that a changed request is a separate
// payment a person approves, not a correction.
func TestConflictReasonSaysWhatTheFirstRequestDid(t *testing.T) {
	t.Parallel()
	paid := operation.ConflictReason("payments", []string{"amount_minor"},
		&operation.Existing{Status: operation.ResultSucceeded, TargetObjectID: "pay-17"})
	require.Contains(t, paid, "amount_minor differs from the first request for this intent, so nothing was executed for this one.")
	require.Contains(t, paid, "The first request succeeded: the payment provider holds object pay-17, and that money has moved.")
	require.Contains(t, paid, "cannot change or replace the first one")
	require.Contains(t, paid, "a separate, additional payment, sent as a new intent (a new intent_id) and, where the policy says so, approved by a person on its own")
	require.Contains(t, paid, "a new intent (a new intent_id)")

	task := operation.ConflictReason("crm", []string{"title", "deadline", "customer_id"},
		&operation.Existing{Status: operation.ResultSucceeded, TargetObjectID: "42"})
	require.Contains(t, task, "title, deadline and customer_id differ from the first request")
	require.Contains(t, task, "object 42 exists in the target")
	require.Contains(t, task, "send it with a new intent_id.")
	require.NotContains(t, task, "approv")

	refused := operation.ConflictReason("payments", nil, &operation.Existing{Status: operation.ResultFailedFinal, ErrorCode: "declined"})
	require.Contains(t, refused, "The request differs from the first request")
	require.Contains(t, refused, "failed for good (declined): it made nothing")
	require.NotContains(t, refused, "money has moved")

	settling := operation.ConflictReason("crm", []string{"title"}, &operation.Existing{Status: operation.ResultPending})
	require.Contains(t, settling, "still being settled")
}

// TestCurrentResultRenamesTheTargetsReplay: a result stored when the
// target's own replay was called "replayed" is answered with it as
// target_replayed; a current one is returned as it is.
func TestCurrentResultRenamesTheTargetsReplay(t *testing.T) {
	t.Parallel()
	old := json.RawMessage(`{"business_status":"open","entity":"task","replayed":false}`)
	require.JSONEq(t, `{"business_status":"open","entity":"task","target_replayed":false}`, string(operation.CurrentResult(old)))
	current := json.RawMessage(`{"business_status":"open","entity":"task","target_replayed":true}`)
	require.Equal(t, string(current), string(operation.CurrentResult(current)))
	require.Nil(t, operation.CurrentResult(nil))
	notObject := json.RawMessage(`"replayed"`)
	require.Equal(t, string(notObject), string(operation.CurrentResult(notObject)))
}
