package mcp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/process"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// TestProcessTool: a declared process is one MCP tool (process_<name>,
// its input schema the process's input, intent_id bounded by what its
// steps' keys leave); calling it runs the process once, calling again is
// a replay, and get_operation reads the process's state by its key — each
// step's status, key and object. A declined charge answers failed_final
// once the invoice is cancelled.
func TestProcessTool(t *testing.T) {
	t.Parallel()
	d := daemontest.StartWith(t, daemontest.SQLite, daemontest.Options{Processes: map[string]process.Decl{"order.checkout": daemontest.Checkout()}})
	d.StartCoordinator(t, "coord-mcp", nil)
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 30 * time.Second}, gateway.Deps{NC: d.NC, Journal: d.Journal, Processes: d.Processes})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv, err := gwmcp.NewServer(g, gwmcp.Options{Version: "test"})
	require.NoError(t, err)
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var tool *sdk.Tool
	for _, tl := range tools.Tools {
		if tl.Name == "process_order_checkout" {
			tool = tl
		}
	}
	require.NotNil(t, tool, "one tool per declared process")
	require.Contains(t, tool.Description, "1. invoice (invoice.create), undone by invoice.cancel")
	schema, err := json.Marshal(tool.InputSchema)
	require.NoError(t, err)
	def, _ := d.Processes.Lookup("order.checkout")
	var in struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			MaxLength int `json:"maxLength"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(schema, &in))
	require.ElementsMatch(t, []string{"intent_id", "order_id", "customer_id", "account_id", "amount_minor", "currency", "responsible_id"}, in.Required)
	require.Equal(t, def.MaxIntentLen(daemontest.Env), in.Properties["intent_id"].MaxLength)

	args := func(intent, account string) map[string]any {
		return map[string]any{"intent_id": intent, "approval_id": "appr-" + intent, "order_id": intent, "customer_id": "cust-17",
			"account_id": account, "amount_minor": 125000, "currency": "RUB", "responsible_id": "12"}
	}
	a := call(t, cs, "process_order_checkout", args("mcp-1", "card-ok"))
	require.Equal(t, gateway.StatusSucceeded, a.Status, "%+v", a)
	require.Equal(t, gateway.Done, a.NextAction)
	again := call(t, cs, "process_order_checkout", args("mcp-1", "card-ok"))
	require.True(t, again.Replayed)
	require.Equal(t, a.Result, again.Result)

	read := call(t, cs, "get_operation", map[string]any{"operation_key": a.OperationKey})
	require.Equal(t, gateway.StatusSucceeded, read.Status)
	var v process.View
	require.NoError(t, json.Unmarshal(read.Result, &v))
	require.Equal(t, journal.ProcessSucceeded, v.Status)
	require.Len(t, v.Steps, 3)
	for _, s := range v.Steps {
		require.Equal(t, "succeeded", s.Status)
		require.NotEmpty(t, s.OperationKey)
		require.NotEmpty(t, s.TargetObjectID)
	}
	byIntent := call(t, cs, "get_operation", map[string]any{"operation": "process.order.checkout", "intent_id": "mcp-1"})
	require.Equal(t, read.Result, byIntent.Result)

	declined := call(t, cs, "process_order_checkout", args("mcp-2", sbyookassa.MethodDeclined))
	require.Equal(t, gateway.StatusFailedFinal, declined.Status, "%+v", declined)
	require.Equal(t, gateway.HumanReview, declined.NextAction)
	require.NoError(t, json.Unmarshal(declined.Result, &v))
	require.Equal(t, journal.ProcessCompensated, v.Status)
	require.Equal(t, "succeeded", v.Steps[0].Compensation.Status)
	require.Equal(t, 3, d.OneC.TotalEffects(), "two invoices, one cancelling document")
	require.Equal(t, 1, d.Bitrix24.TotalEffects())
}
