package mcp_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/answer"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/operation"
)

// TestEveryAnswerFitsTheOutputSchema: the answer of every row of the rules
// table — await_approval with its approval block among them — validates
// against the tools' output schema (an MCP client that checks structured
// content against it would otherwise refuse the answer), and a schema that
// lost a next action would fail here.
func TestEveryAnswerFitsTheOutputSchema(t *testing.T) {
	t.Parallel()
	resolved, err := gwmcp.AnswerSchema().Resolve(nil)
	require.NoError(t, err)
	var th answer.Thresholds
	seen := map[answer.NextAction]bool{}
	for _, r := range answer.Rules() {
		a := th.Of(r.State, answer.Facts{Operation: "payment.charge", TargetSystem: "payments", ErrorCode: "declined",
			ConflictFields: []string{"amount_minor"}, Existing: &operation.Existing{Status: "succeeded", TargetObjectID: "pay-1"}})
		a.OperationKey = "test:payment.charge:i-1:v1"
		if r.NextAction == answer.AwaitApproval {
			a.Approval = &operation.ApprovalWait{URL: "http://127.0.0.1:8081/ui/approval?key=k", ExpiresAt: time.Now(), Approvers: 1}
		}
		b, err := json.Marshal(a)
		require.NoError(t, err)
		var v any
		require.NoError(t, json.Unmarshal(b, &v))
		require.NoError(t, resolved.Validate(v), "%s: %s", r.State, b)
		seen[r.NextAction] = true
	}
	for _, na := range answer.NextActions() {
		require.True(t, seen[na], "no rule answers %s", na)
	}
	bad := map[string]any{"status": "pending", "operation_key": "k", "replayed": false, "target_object_id": "", "error_code": "",
		"reason": "r", "retry_after_ms": 1000, "next_action": "wait_a_bit"}
	require.Error(t, resolved.Validate(bad), "an unknown next action is refused")
}
