package mcp_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
)

// bundle is one test's daemon, gateway and MCP client session.
type bundle struct {
	d  *daemontest.Daemon
	g  *gateway.Gateway
	cs *sdk.ClientSession
}

func setup(t *testing.T, engine string, cfg gateway.Config, reg *operation.Registry) *bundle {
	t.Helper()
	d := daemontest.Start(t, engine)
	cfg.Env = daemontest.Env
	if cfg.Wait == 0 {
		cfg.Wait = 20 * time.Second
	}
	g, err := gateway.New(cfg, gateway.Deps{NC: d.NC, Journal: d.Journal, Registry: reg})
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
	return &bundle{d: d, g: g, cs: cs}
}

// call calls a tool and returns its answer, checking that the text content
// is the structured content and that isError follows the status.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) gateway.Answer {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	return answerOf(t, res)
}

func answerOf(t *testing.T, res *sdk.CallToolResult) gateway.Answer {
	t.Helper()
	structured, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var a gateway.Answer
	require.NoError(t, json.Unmarshal(structured, &a), "%s", structured)
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*sdk.TextContent)
	require.True(t, ok)
	require.JSONEq(t, string(structured), text.Text, "the text is the structured content")
	require.Equal(t, a.IsError(), res.IsError, "isError for rejected, conflict and failed_final: %+v", a)
	for _, member := range []string{"status", "operation_key", "replayed", "target_object_id", "error_code", "reason", "retry_after_ms", "next_action"} {
		require.Contains(t, text.Text, `"`+member+`"`, "every answer carries %s", member)
	}
	return a
}

func chargeArgs(intent, order string, amount int64) map[string]any {
	return map[string]any{"intent_id": intent, "approval_id": "appr-1",
		"account_id": "merchant-account-17", "order_id": order, "amount_minor": amount, "currency": "RUB"}
}

// TestToolsListSchemas: one tool per registered type (a type registered
// later included), its input schema built from the registry, the key
// discipline in its description, and the annotations.
func TestToolsListSchemas(t *testing.T) {
	reg := operation.DefaultRegistry()
	require.NoError(t, reg.Register(operation.Type{Name: "payment.payout", TargetSystem: "payments", RequiresApproval: true,
		Fields: []operation.Field{
			{Name: "recipient_id", Kind: operation.KindString, Required: true, MaxLen: 64},
			{Name: "amount_minor", Kind: operation.KindMoney, Required: true},
			{Name: "currency", Kind: operation.KindCurrency, Required: true},
			{Name: "value_date", Kind: operation.KindDate},
			{Name: "instant", Kind: operation.KindBool},
			{Name: "priority", Kind: operation.KindInt},
		}}))
	b := setup(t, daemontest.SQLite, gateway.Config{}, reg)
	res, err := b.cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	tools := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
	}
	for _, name := range []string{"invoice_create", "crm_task_create", "crm_deal_create", "payment_charge", "payment_refund",
		"payment_payout", "get_operation", "list_unresolved"} {
		require.Contains(t, tools, name)
	}
	require.Len(t, tools, len(reg.Names())+2)

	jsonType := map[operation.FieldKind]string{
		operation.KindString: "string", operation.KindMoney: "integer", operation.KindCurrency: "string",
		operation.KindTime: "string", operation.KindDate: "string", operation.KindInt: "integer", operation.KindBool: "boolean",
	}
	for _, name := range reg.Names() {
		typ, _ := reg.Lookup(name)
		tool := tools[gwmcp.ToolName(name)]
		t.Run(tool.Name, func(t *testing.T) {
			schema := tool.InputSchema.(map[string]any)
			require.Equal(t, "object", schema["type"])
			require.Equal(t, false, schema["additionalProperties"], "only the type's fields")
			props := schema["properties"].(map[string]any)
			required := toStrings(schema["required"])
			require.Contains(t, required, "intent_id")
			require.NotContains(t, required, "approval_id", "a reference of the caller's authorises nothing: never required")
			require.Contains(t, props, "approval_id")
			require.Contains(t, props["intent_id"].(map[string]any)["description"], "reused unchanged on every retry")
			require.Contains(t, props, "approval_token", "a pre-signed approval token may come with any call")
			require.NotContains(t, required, "approval_token")
			require.Len(t, props, len(typ.Fields)+3)
			for _, f := range typ.Fields {
				p, ok := props[f.Name].(map[string]any)
				require.True(t, ok, "field %s", f.Name)
				require.Equal(t, jsonType[f.Kind], p["type"], "field %s", f.Name)
				require.Equal(t, f.Required, slices.Contains(required, f.Name), "field %s", f.Name)
				switch f.Kind {
				case operation.KindMoney:
					minimum := 1.0
					if f.AllowZero {
						minimum = 0
					}
					require.Equal(t, minimum, p["minimum"], "field %s", f.Name)
					require.Equal(t, float64(1<<53-1), p["maximum"])
					require.Contains(t, p["description"], "minor units")
				case operation.KindCurrency:
					require.Equal(t, "^[A-Za-z]{3}$", p["pattern"])
				case operation.KindDate:
					require.Equal(t, "date", p["format"])
				case operation.KindTime:
					require.Equal(t, "date-time", p["format"])
				case operation.KindString:
					maxLen := f.MaxLen
					if maxLen == 0 {
						maxLen = operation.DefaultMaxLen
					}
					require.Equal(t, float64(maxLen), p["maxLength"])
				}
			}
			require.Contains(t, tool.Description, "reuse it on every retry")
			require.Contains(t, tool.Description, "new_intent_required")
			ann := tool.Annotations
			require.True(t, ann.IdempotentHint)
			require.False(t, ann.ReadOnlyHint)
			require.True(t, *ann.OpenWorldHint)
			require.Equal(t, typ.TargetSystem == "payments", *ann.DestructiveHint, "destructive when money moves")
			moves := typ.RequiresApproval || typ.TargetSystem == "payments"
			require.Equal(t, moves, strings.Contains(tool.Description, "A retry of this payment MUST reuse its intent_id"),
				"money tools say a retry must reuse intent_id")
			out := tool.OutputSchema.(map[string]any)
			require.Equal(t, "object", out["type"])
			require.Contains(t, out["properties"], "next_action", "the output schema is the answer's")
		})
	}
	require.True(t, tools["get_operation"].Annotations.ReadOnlyHint)
	require.True(t, tools["list_unresolved"].Annotations.ReadOnlyHint)

	// What the schema admits, the daemon's decoder accepts.
	in, err := gwmcp.InputSchema(daemontest.Env, mustType(t, reg, "payment.charge"))
	require.NoError(t, err)
	resolved, err := in.Resolve(nil)
	require.NoError(t, err)
	good := chargeArgs("i-1", "o-1", 125000)
	require.NoError(t, resolved.Validate(asJSONValue(t, good)))
	for name, bad := range map[string]map[string]any{
		"decimal amount": {"amount_minor": 1250.5}, "string amount": {"amount_minor": "1250"},
		"long currency": {"currency": "RUBL"}, "extra field": {"note": "x"},
	} {
		args := chargeArgs("i-1", "o-1", 125000)
		for k, v := range bad {
			args[k] = v
		}
		require.Error(t, resolved.Validate(asJSONValue(t, args)), name)
		a := call(t, b.cs, "payment_charge", args)
		require.Equal(t, gateway.StatusRejected, a.Status, name)
		require.Equal(t, gateway.FixInput, a.NextAction, name)
	}
	require.Equal(t, 0, b.d.YooKassa.TotalEffects())
}

func mustType(t *testing.T, reg *operation.Registry, name string) operation.Type {
	typ, ok := reg.Lookup(name)
	require.True(t, ok)
	return typ
}

func asJSONValue(t *testing.T, v map[string]any) any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestPaymentChargeThroughMCP: the guarantee through MCP tools, counted in
// the YooKassa ledger, on both journals.
func TestPaymentChargeThroughMCP(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			b := setup(t, engine, gateway.Config{PollAfter: 200 * time.Millisecond}, nil)
			y := b.d.YooKassa

			// The same intent twice: one charge, the second replayed.
			first := call(t, b.cs, "payment_charge", chargeArgs("mcp-1", "order-1", 125000))
			require.Equal(t, gateway.StatusSucceeded, first.Status, "%+v", first)
			require.Equal(t, gateway.Done, first.NextAction)
			require.False(t, first.Replayed)
			second := call(t, b.cs, "payment_charge", chargeArgs("mcp-1", "order-1", 125000))
			require.Equal(t, gateway.StatusSucceeded, second.Status)
			require.True(t, second.Replayed)
			require.Equal(t, gateway.Done, second.NextAction)
			require.Equal(t, first.TargetObjectID, second.TargetObjectID)
			require.Equal(t, 1, y.TotalEffects())

			// A changed amount: conflict, a new intent is required, no charge.
			changed := call(t, b.cs, "payment_charge", chargeArgs("mcp-1", "order-1", 500000))
			require.Equal(t, gateway.StatusConflict, changed.Status, "%+v", changed)
			require.Equal(t, gateway.NewIntentRequired, changed.NextAction)
			require.Contains(t, changed.Reason, "a separate, additional payment, sent as a new intent (a new intent_id) and, where the policy says so, approved by a person on its own")
			require.Contains(t, changed.Reason, "and that money has moved")
			require.Equal(t, &operation.Existing{Status: operation.ResultSucceeded, TargetObjectID: first.TargetObjectID}, changed.Existing)
			require.Equal(t, []string{"amount_minor"}, changed.ConflictFields)
			both := call(t, b.cs, "payment_charge", map[string]any{"intent_id": "mcp-1", "approval_id": "appr-1",
				"account_id": "merchant-account-17", "order_id": "order-1", "amount_minor": 500000, "currency": "EUR"})
			require.Equal(t, []string{"amount_minor", "currency"}, both.ConflictFields)
			require.Contains(t, both.Reason, "amount_minor and currency differ from the first request for this intent")
			require.Equal(t, 1, y.TotalEffects())

			// A lost response: poll, then get_operation says done once
			// reconciliation found the payment.
			require.NoError(t, y.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1}))
			lostArgs := chargeArgs("mcp-lost", "order-2", 99000)
			lost := callWithWait(t, b, "payment_charge", lostArgs, 300*time.Millisecond)
			require.Equal(t, gateway.StatusPending, lost.Status, "%+v", lost)
			require.Equal(t, gateway.Poll, lost.NextAction)
			require.Equal(t, int64(200), lost.RetryAfterMS)
			var got gateway.Answer
			deadline := time.Now().Add(30 * time.Second)
			for {
				got = call(t, b.cs, "get_operation", map[string]any{"operation_key": lost.OperationKey})
				if got.Status != gateway.StatusPending || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Duration(got.RetryAfterMS) * time.Millisecond) // as next_action poll says
			}
			require.Equal(t, gateway.StatusSucceeded, got.Status, "%+v", got)
			require.Equal(t, gateway.Done, got.NextAction)
			require.True(t, slices.ContainsFunc(got.Trail, func(s gateway.Step) bool { return s.Kind == "reconcile" }), "%+v", got.Trail)
			byIntent := call(t, b.cs, "get_operation", map[string]any{"operation": "payment.charge", "intent_id": "mcp-lost"})
			require.Equal(t, got.TargetObjectID, byIntent.TargetObjectID)
			require.Equal(t, 2, y.TotalEffects(), "two intents, two charges")

			// 20 concurrent calls of one intent: one charge, 20 identical ids.
			results := make([]*sdk.CallToolResult, 20)
			errs := make([]error, 20)
			var wg sync.WaitGroup
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = b.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "payment_charge", Arguments: chargeArgs("mcp-race", "order-3", 4200)})
				}()
			}
			wg.Wait()
			answers := make([]gateway.Answer, len(results))
			for i, res := range results {
				require.NoError(t, errs[i])
				answers[i] = answerOf(t, res)
			}
			for i, a := range answers {
				require.Equal(t, gateway.StatusSucceeded, a.Status, "call %d: %+v", i, a)
				require.Equal(t, answers[0].TargetObjectID, a.TargetObjectID, "call %d", i)
			}
			require.Equal(t, 3, y.TotalEffects(), "three intents, three charges")

			unresolved := callRaw(t, b.cs, "list_unresolved", map[string]any{})
			require.False(t, unresolved.IsError)
			require.Contains(t, unresolved.Content[0].(*sdk.TextContent).Text, `"operations":[]`)
		})
	}
}

// callWithWait calls through a gateway with another bound, on the same daemon.
func callWithWait(t *testing.T, b *bundle, tool string, args map[string]any, wait time.Duration) gateway.Answer {
	t.Helper()
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: wait, PollAfter: 200 * time.Millisecond}, gateway.Deps{NC: b.d.NC, Journal: b.d.Journal})
	require.NoError(t, err)
	defer g.Close()
	srv, err := gwmcp.NewServer(g, gwmcp.Options{})
	require.NoError(t, err)
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "impatient-agent", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	return call(t, cs, tool, args)
}

func callRaw(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	return res
}

// TestGetOperationArguments: get_operation needs a key or an intent.
func TestGetOperationArguments(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{}, nil)
	a := call(t, b.cs, "get_operation", map[string]any{})
	require.Equal(t, gateway.StatusRejected, a.Status)
	require.Equal(t, gateway.FixInput, a.NextAction)
	none := call(t, b.cs, "get_operation", map[string]any{"operation_key": "test:payment.charge:never-sent:v1"})
	require.Equal(t, gateway.StatusNotFound, none.Status)
	require.Equal(t, gateway.RetrySameIntent, none.NextAction)
	noIntent := call(t, b.cs, "payment_charge", map[string]any{"account_id": "a"})
	require.Equal(t, gateway.StatusRejected, noIntent.Status)
	require.Contains(t, noIntent.Reason, "intent_id")
	wrongType := call(t, b.cs, "payment_charge", map[string]any{"intent_id": 42})
	require.Equal(t, gateway.StatusRejected, wrongType.Status)
	require.Contains(t, wrongType.Reason, "intent_id: must be a string")
}

// TestListUnresolved: list_unresolved names what needs someone, with the
// next_action the journal row calls for: an unknown outcome past
// review_after lookups (human_review), a retryable failure nobody retries
// (retry_same_intent) — and not an unknown outcome still under
// review_after, which answers poll.
func TestListUnresolved(t *testing.T) {
	ns := natstest.Start(t)
	nc, _ := ns.Connect(t)
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	ctx := context.Background()
	claim := func(key string) journal.Claim {
		c, err := journal.ClaimOne(ctx, store, journal.ClaimRequest{Key: key, OperationType: "payment.charge", RequestHash: "h",
			TargetSystem: "payments", Owner: "w", LeaseTTL: time.Minute})
		require.NoError(t, err)
		return c
	}
	lost := claim("test:payment.charge:lost-1:v1")
	require.NoError(t, journal.CompleteOne(ctx, store, journal.Completion{Key: lost.Record.Key, Token: lost.Token,
		Status: journal.StatusUnknown, Reconciled: true, ErrorCode: "timeout_after_request_sent"}))
	again, err := store.TakeOverStale(ctx, "reconciler", time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.NoError(t, journal.CompleteOne(ctx, store, journal.Completion{Key: lost.Record.Key, Token: again[0].Token,
		Status: journal.StatusUnknown, Reconciled: true, ErrorCode: "lookup_indeterminate"}))
	// One lookup, under review_after: still being settled, not unresolved.
	settling := claim("test:payment.charge:settling-1:v1")
	require.NoError(t, journal.CompleteOne(ctx, store, journal.Completion{Key: settling.Record.Key, Token: settling.Token,
		Status: journal.StatusUnknown, Reconciled: true, ErrorCode: "timeout_after_request_sent"}))
	idle := claim("test:payment.charge:idle-1:v1")
	require.NoError(t, journal.CompleteOne(ctx, store, journal.Completion{Key: idle.Record.Key, Token: idle.Token,
		Status: journal.StatusFailedRetryable, ErrorCode: "http_503"}))

	g, err := gateway.New(gateway.Config{Env: daemontest.Env, ReviewAfter: 2, IdleAfter: time.Millisecond}, gateway.Deps{NC: nc, Journal: store})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv, err := gwmcp.NewServer(g, gwmcp.Options{})
	require.NoError(t, err)
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "operator-agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	var out gwmcp.UnresolvedOutput
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := callRaw(t, cs, "list_unresolved", map[string]any{"limit": 10})
		require.False(t, res.IsError)
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &out))
		if len(out.Operations) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the idle retry must age past idle_after on the journal's clock
	}
	require.Len(t, out.Operations, 2, "the unknown outcome with one lookup (review_after 2) is not listed")
	byKey := map[string]gateway.Answer{}
	for _, a := range out.Operations {
		byKey[a.OperationKey] = a
	}
	review := byKey["test:payment.charge:lost-1:v1"]
	require.Equal(t, gateway.HumanReview, review.NextAction)
	require.Equal(t, "unknown", review.JournalStatus)
	require.Contains(t, review.Reason, "after 2 lookups")
	resend := byKey["test:payment.charge:idle-1:v1"]
	require.Equal(t, gateway.RetrySameIntent, resend.NextAction)
	require.Equal(t, "http_503", resend.ErrorCode)
}
