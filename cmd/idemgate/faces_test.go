package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

// story is what a face answered for an operation: the three members every
// face must agree on.
type story struct {
	Status     string `json:"status"`
	NextAction string `json:"next_action"`
	Reason     string `json:"reason"`
}

// TestEveryFaceTellsOneStory: for each journal state an operation can be
// in, every face of a running daemon answers the same status, next_action
// and reason — the result published on NATS (and read back by a
// subscriber), `idemgate publish --wait` (the worker's answer to the same
// command again), MCP's get_operation, the HTTP API's GET, `idemgate trace
// --json` and the console's operation page — and that answer is the rules
// table's (package answer). The rows are written in the daemon's own
// journal as the worker, the reconciler, an approval and a cancellation
// write them; the reconciler does not run during the test
// (reconciler.interval 1h) so that each row stays in its state;
// review_after is 1, so one unsettled lookup makes an unknown outcome
// unresolved. The states with an idle retry (idle_after) are held to the
// table by the answer package's tests.
func TestEveryFaceTellsOneStory(t *testing.T) {
	gd := startGatewayDaemon(t, func(c *Config) {
		c.MCP.Listener = faceConfig{Enabled: true, Addr: "127.0.0.1:0", MaxBody: 1 << 20}
		c.HTTPAPI = faceConfig{Enabled: true, Addr: "127.0.0.1:0", MaxBody: 64 << 10}
		c.Admin.Addr = "127.0.0.1:0"
		c.Console.Enabled = true
		c.Console.Users = consoleUsers()
		c.Reconciler.Interval = time.Hour
		c.Reconciler.ReviewAfter = 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st := gd.d.store
	th := gd.cfg.Reconciler.Thresholds()
	require.Equal(t, 1, th.ReviewAfter)
	reg, err := gd.cfg.registry()
	require.NoError(t, err)
	cfgPath := writeConfig(t, fmt.Sprintf("env: test\ndata_dir: %s\nnats:\n  embedded_addr: %s\nlog:\n  level: warn\nroutes: {payment.charge: yookassa}\nreconciler:\n  review_after: 1\n",
		gd.cfg.DataDir, gd.cfg.NATS.EmbeddedAddr))

	nc, err := nats.Connect("nats://" + gd.cfg.NATS.EmbeddedAddr)
	require.NoError(t, err)
	defer nc.Close()
	jnc, js, err := toolJetStream(gd.cfg)
	require.NoError(t, err)
	defer jnc.Close()
	published := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(wire.ResultSubject("payment.charge"), published)
	require.NoError(t, err)
	defer sub.Unsubscribe() //nolint:errcheck
	require.NoError(t, nc.Flush())

	mcp, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: "http://" + gd.d.faces.mcpAddr + "/mcp", DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer mcp.Close()
	operator := loginConsole(t, "http://"+gd.d.adminAddr, consoleToken)

	// command is the payment.charge `idemgate publish` sends for intent
	// ev (chargeArgs), decoded as the daemon decodes it.
	command := func(ev string) operation.Operation {
		op, err := decodeCommand(gd.cfg, reg, operation.Command{EventID: ev, Operation: "payment.charge", ApprovalID: "appr-1",
			Payload: json.RawMessage(`{"account_id":"merchant-account-17","order_id":"order-` + ev + `","amount_minor":125000,"currency":"RUB"}`)})
		require.NoError(t, err)
		return op
	}
	claim := func(op operation.Operation) journal.Claim {
		c, err := journal.ClaimOne(ctx, st, journal.ClaimRequest{Key: op.Key.String(), OperationType: op.Type, RequestHash: op.Fingerprint,
			TargetSystem: op.TargetSystem, EventID: op.EventID, ApprovalID: op.ApprovalID, Owner: "faces-test", LeaseTTL: time.Hour,
			FieldDigests: op.FieldDigests()})
		require.NoError(t, err)
		require.Equal(t, journal.Execute, c.Decision)
		return c
	}
	complete := func(op operation.Operation, c journal.Completion) {
		cl := claim(op)
		c.Key, c.Token = op.Key.String(), cl.Token
		require.NoError(t, journal.CompleteOne(ctx, st, c))
	}
	hold := time.Hour // a retry or lookup not due while the test runs

	cases := []struct {
		state answer.State
		write func(op operation.Operation)
	}{
		{answer.StateSucceeded, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusSucceeded, TargetObjectID: "pay-faces-1",
				Result: json.RawMessage(`{"business_status":"succeeded"}`)})
		}},
		{answer.StateFailedFinal, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusFailedFinal, ErrorCode: "declined"})
		}},
		{answer.StateCancelled, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusFailedFinal, ErrorCode: answer.CodeCancelled})
		}},
		{answer.StateApprovalDenied, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusFailedFinal, ErrorCode: journal.ErrorApprovalDenied})
		}},
		{answer.StateApprovalExpired, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusFailedFinal, ErrorCode: journal.ErrorApprovalExpired})
		}},
		{answer.StateStarted, func(op operation.Operation) { claim(op) }},
		{answer.StateRetrying, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusFailedRetryable, ErrorCode: "http_503", HoldFor: hold})
		}},
		{answer.StateHeldBack, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusFailedRetryable, ErrorCode: "http_429", HoldFor: hold})
		}},
		{answer.StateUnknown, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusUnknown, ErrorCode: "timeout_after_request_sent", HoldFor: hold})
		}},
		{answer.StateNeedsReview, func(op operation.Operation) {
			complete(op, journal.Completion{Status: journal.StatusUnknown, ErrorCode: "timeout_after_request_sent", HoldFor: hold, Reconciled: true})
		}},
		{answer.StateAwaitingApproval, func(op operation.Operation) {
			_, _, err := st.RequestApproval(ctx, journal.ApprovalRequest{Key: op.Key.String(), OperationType: op.Type, RequestHash: op.Fingerprint,
				TargetSystem: op.TargetSystem, EventID: op.EventID, Display: json.RawMessage(`{"amount_minor":"125000"}`), Approvers: 1, TTL: time.Hour})
			require.NoError(t, err)
		}},
	}
	covered := map[answer.State]bool{}
	for i, tc := range cases {
		ev := fmt.Sprintf("faces-%d", i)
		op := command(ev)
		key := op.Key.String()
		tc.write(op)
		rec, err := st.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, tc.state, th.StateOf(rec, time.Now()), "the row written is in the state under test")
		covered[tc.state] = true
		want := th.FromRecord(rec, time.Now())
		rule := answer.For(tc.state)
		require.Equal(t, rule.Status, want.Status)
		require.Equal(t, rule.NextAction, want.NextAction)
		stories := map[string]story{}

		// NATS: the result the daemon publishes for the row (as after a
		// lookup or an operator's decision), read by a subscriber.
		require.NoError(t, worker.PublishResult(ctx, js, th, rec))
		stories["nats result"] = resultStory(t, published, key)

		// publish --wait: the same command again; the worker answers it
		// from the row (a final outcome replayed, a pending one told). An
		// intent awaiting approval is not sent again: this daemon gates
		// nothing, and would execute it.
		if tc.state != answer.StateAwaitingApproval {
			args := append(chargeArgs(ev), "--config", cfgPath, "--wait", "--timeout", "3s")
			_, stdout, stderr := runTool(t, args...)
			if want.Final() {
				var res operation.Result
				require.NoError(t, json.Unmarshal([]byte(stdout), &res), "%s\n%s", stdout, stderr)
				require.True(t, res.Replayed)
				stories["publish --wait"] = story{string(res.Status), res.NextAction, res.Reason}
			} else {
				m := regexp.MustCompile(`pending: ` + regexp.QuoteMeta(key) + ` next_action=(\S+) reason=(.*)`).FindStringSubmatch(stderr)
				require.NotNil(t, m, stderr)
				stories["publish --wait"] = story{answer.StatusPending, m[1], m[2]}
			}
		}

		// MCP get_operation.
		res, err := mcp.CallTool(ctx, &sdk.CallToolParams{Name: "get_operation", Arguments: map[string]any{"operation_key": key}})
		require.NoError(t, err)
		a := toolAnswer(t, res)
		stories["mcp get_operation"] = story{a.Status, string(a.NextAction), a.Reason}

		// HTTP API GET.
		resp, err := http.Get("http://" + gd.d.faces.httpAddr + "/v1/operations/" + key)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		var h answer.Answer
		require.NoError(t, json.Unmarshal(body, &h), "%s", body)
		stories["http GET"] = story{h.Status, string(h.NextAction), h.Reason}

		// idemgate trace --json.
		code, stdout, stderr := runTool(t, "trace", key, "--json", "--config", cfgPath)
		require.Equal(t, 0, code, stderr)
		var tr struct {
			Answer story `json:"answer"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &tr), stdout)
		stories["trace"] = tr.Answer
		_, stdout, _ = runTool(t, "trace", key, "--config", cfgPath)
		require.Contains(t, stdout, fmt.Sprintf("answer     %s, next action %s: %s\n", want.Status, want.NextAction, want.Reason))

		// The console's operation page.
		status, page := operator.do("GET", "/ui/operation?key="+key, nil)
		require.Equal(t, http.StatusOK, status, page)
		field := func(id string) string {
			m := regexp.MustCompile(`id="` + id + `">([^<]*)</span>`).FindStringSubmatch(page)
			require.NotNil(t, m, "%s on the console's page", id)
			return m[1]
		}
		stories["console"] = story{field("op-answer-status"), field("op-next-action"), field("op-reason")}

		for face, got := range stories {
			require.Equal(t, story{want.Status, string(want.NextAction), want.Reason}, got, "%s: %s tells another story", tc.state, face)
		}
	}
	for _, r := range answer.Rules() {
		switch {
		case strings.HasPrefix(string(r.State), "process/"), strings.HasSuffix(string(r.State), "/idle"):
			continue // processes: gateway and process tests; idle retries: the answer package's
		case r.State == answer.StatePending, r.State == answer.StateQueued, r.State == answer.StateConflict, r.State == answer.StateRejected,
			r.State == answer.StateNotRouted, r.State == answer.StateUnavailable, r.State == answer.StateNotFound:
			continue // no journal row behind it
		}
		require.True(t, covered[r.State], "journal state %s: no face was asked about it", r.State)
	}
	require.Zero(t, gd.yk.TotalEffects(), "no command was executed: every answer came from the journal")
}

// resultStory is the last result published on NATS for key.
func resultStory(t *testing.T, published <-chan *nats.Msg, key string) story {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-published:
			var r operation.Result
			require.NoError(t, json.Unmarshal(m.Data, &r))
			if r.OperationKey == key {
				return story{string(r.Status), r.NextAction, r.Reason}
			}
		case <-deadline:
			t.Fatalf("no result for %s on NATS", key)
		}
	}
}
