package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/daemontest"
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
