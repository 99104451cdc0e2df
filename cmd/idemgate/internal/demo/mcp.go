package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/sandbox"
)

// mcpAgent: the scripted agent speaks MCP instead of NATS. It lists the
// tools, charges, retries the call, sends a changed amount under the same
// intent, and charges again while YooKassa loses the answer — then follows
// next_action: done, done (replayed), new_intent_required, poll until done.
func mcpAgent(ctx context.Context, s *session, row *Row) error {
	y := s.rt.Sandboxes.YooKassa
	m := mark(y)
	g, err := gateway.New(gateway.Config{Env: s.rt.Env, Wait: time.Second, PollAfter: 250 * time.Millisecond},
		gateway.Deps{NC: s.nc, Journal: s.rt.Journal})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer g.Close()
	srv, err := gwmcp.NewServer(g, gwmcp.Options{Version: "demo"})
	if err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return fmt.Errorf("mcp server session: %w", err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "demo-agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return fmt.Errorf("mcp client: %w", err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	s.p.step("agent connects over MCP: %d tools (one per operation type, get_operation, list_unresolved)", len(tools.Tools))

	in := s.intent(opCharge, "mcp", chargePayload("order-48295", 125000))
	lostIn := s.intent(opCharge, "mcp-lost", chargePayload("order-48296", 7000))
	row.Intents = 2
	call := func(tool string, args map[string]any) (gateway.Answer, error) {
		if tool != "get_operation" {
			row.Sent++ // commands; lookups send none
		}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return gateway.Answer{}, fmt.Errorf("%s: %w", tool, err)
		}
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return gateway.Answer{}, err
		}
		var a gateway.Answer
		if err := json.Unmarshal(b, &a); err != nil {
			return gateway.Answer{}, fmt.Errorf("%s answer: %w", tool, err)
		}
		if a.Replayed {
			row.Replays++
		}
		if a.Status == gateway.StatusConflict {
			row.Conflicts++
		}
		return a, nil
	}
	args := func(in intent, minor int64) map[string]any {
		a := map[string]any{"intent_id": in.id, "approval_id": "appr-" + s.runID + "-mcp"}
		for k, v := range in.payload {
			a[k] = v
		}
		a["amount_minor"] = minor
		return a
	}

	first, err := call("payment_charge", args(in, 125000))
	if err != nil {
		return err
	}
	s.p.step("agent: payment_charge %s → %s, next_action %s (payment %s)", rub(125000), first.Status, first.NextAction, first.TargetObjectID)
	again, err := call("payment_charge", args(in, 125000))
	if err != nil {
		return err
	}
	s.p.step("agent retries the call (its client timed out) → %s, replayed %v, next_action %s", again.Status, again.Replayed, again.NextAction)
	changed, err := call("payment_charge", args(in, 500000))
	if err != nil {
		return err
	}
	s.p.step("agent: same intent_id, %s → %s, next_action %s: %q", rub(500000), changed.Status, changed.NextAction, changed.Reason)

	cleanup, err := s.inject(y, "the next payment is created, then its answer never comes",
		sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1})
	if err != nil {
		return err
	}
	defer cleanup()
	lost, err := call("payment_charge", args(lostIn, 7000))
	if err != nil {
		return err
	}
	s.p.step("agent: payment_charge %s → %s, next_action %s after %d ms", rub(7000), lost.Status, lost.NextAction, lost.RetryAfterMS)
	settled, polls := lost, 0
	for settled.NextAction == gateway.Poll {
		if !ctxsleep.For(ctx, time.Duration(settled.RetryAfterMS)*time.Millisecond) { // what poll asks the agent to do
			return context.Cause(ctx)
		}
		polls++
		if settled, err = call("get_operation", map[string]any{"operation_key": lost.OperationKey}); err != nil {
			return err
		}
	}
	s.p.step("agent: get_operation ×%d → %s, next_action %s (payment %s)", polls, settled.Status, settled.NextAction, settled.TargetObjectID)
	atts, err := s.attempts(ctx, lostIn.key(s.rt.Env))
	if err != nil {
		return err
	}
	executes, reconciled := countKinds(atts)
	row.Reconciled = reconciled

	judgeEffects(row, m, row.Intents)
	row.check("a retried tool call is answered with the stored outcome",
		first.NextAction == gateway.Done && again.Replayed && again.NextAction == gateway.Done && again.TargetObjectID == first.TargetObjectID,
		"first %s, retry %s replayed=%v, payment %s both times", first.NextAction, again.NextAction, again.Replayed, again.TargetObjectID)
	row.check("a changed amount is a new intent, nothing charged",
		changed.Status == gateway.StatusConflict && changed.NextAction == gateway.NewIntentRequired &&
			slices.Equal(changed.ConflictFields, []string{"amount_minor"}),
		"%s, next_action %s, conflict_fields %v", changed.Status, changed.NextAction, changed.ConflictFields)
	row.check("a lost answer: poll, then done after a lookup by key",
		lost.NextAction == gateway.Poll && settled.NextAction == gateway.Done && executes == 1 && reconciled == 1 &&
			settled.JournalStatus == string(journal.StatusSucceeded),
		"pending → %d get_operation → %s; %d call to YooKassa, %d reconciliation", polls, settled.Status, executes, reconciled)
	return nil
}
