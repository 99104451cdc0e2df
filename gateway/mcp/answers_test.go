package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
)

// TestIntentLengthTheSchemaStatesIsTheDaemons: the maxLength tools/list
// gives intent_id is the daemon's own limit — an intent of exactly that
// length is charged, one byte more is rejected naming intent_id and the
// same number.
func TestIntentLengthTheSchemaStatesIsTheDaemons(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{}, nil)
	res, err := b.cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var limit int
	for _, tool := range res.Tools {
		if tool.Name == gwmcp.ToolName("payment.charge") {
			props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
			limit = int(props["intent_id"].(map[string]any)["maxLength"].(float64))
		}
	}
	require.Positive(t, limit)

	longest := strings.Repeat("i", limit)
	ok := call(t, b.cs, "payment_charge", chargeArgs(longest, "order-long", 100))
	require.Equal(t, gateway.StatusSucceeded, ok.Status, "%+v", ok)

	over := call(t, b.cs, "payment_charge", chargeArgs(longest+"i", "order-long", 100))
	require.Equal(t, gateway.StatusRejected, over.Status, "%+v", over)
	require.Equal(t, gateway.FixInput, over.NextAction)
	require.Contains(t, over.Reason, fmt.Sprintf("intent_id: longer than %d bytes", limit))
	require.Equal(t, 1, b.d.YooKassa.TotalEffects())
}

// TestReadToolsAnswerBadArgumentsInShape: get_operation and list_unresolved
// answer arguments that do not fit their schemas as the operation tools
// do — rejected / fix_input in structured content naming the argument —
// never the SDK's plain-text error.
func TestReadToolsAnswerBadArgumentsInShape(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{}, nil)
	for name, args := range map[string]map[string]any{
		"operation_key: must be a string": {"operation_key": 42},
		"intent_id: must be a string":     {"operation": "payment.charge", "intent_id": []any{"x"}},
		"order_id: not an argument":       {"order_id": "o-1"},
	} {
		a := call(t, b.cs, "get_operation", args)
		require.Equal(t, gateway.StatusRejected, a.Status, "%s: %+v", name, a)
		require.Equal(t, gateway.FixInput, a.NextAction, name)
		require.Contains(t, a.Reason, name)
	}
	for name, args := range map[string]map[string]any{
		"limit: must be a number":                 {"limit": "ten"},
		"limit: must be a whole number from 1 to": {"limit": 2.5},
		"limit: must be a whole number":           {"limit": -1},
		"since: not an argument":                  {"since": "yesterday"},
	} {
		res := callRaw(t, b.cs, "list_unresolved", args)
		require.True(t, res.IsError, name)
		structured, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var out gwmcp.UnresolvedOutput
		require.NoError(t, json.Unmarshal(structured, &out), "%s: %s", name, structured)
		require.Equal(t, gateway.StatusRejected, out.Status, "%s: %s", name, structured)
		require.Equal(t, gateway.FixInput, out.NextAction, name)
		require.Contains(t, out.Reason, name)
		require.NotNil(t, out.Operations, "operations is always there")
		require.JSONEq(t, string(structured), res.Content[0].(*sdk.TextContent).Text)
	}
	ok := callRaw(t, b.cs, "list_unresolved", map[string]any{"limit": 5})
	require.False(t, ok.IsError)
	require.Contains(t, ok.Content[0].(*sdk.TextContent).Text, `"operations":[]`)
	require.NotContains(t, ok.Content[0].(*sdk.TextContent).Text, `"status"`)
}
