package mcp_test

import (
	"context"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
)

// TestApprovalAskedThroughURLElicitation: a charge that waits for a person,
// called by a client that supports URL-mode elicitation, asks the user to
// open the approval page (the link the answer carries, the key as the
// elicitation id). When the person approves there (here: the approval
// service, as the page does) the call answers done with one charge; when
// the user declines, the call answers await_approval and nothing is
// charged. A client without the capability is never asked.
func TestApprovalAskedThroughURLElicitation(t *testing.T) {
	d := daemontest.StartWith(t, daemontest.SQLite, daemontest.Options{Approvals: true})
	// The daemon's link (daemontest's worker), given to the gateway too.
	link := func(k string) string { return "https://idemgate.example/ui/approvals/" + k }
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 20 * time.Second},
		gateway.Deps{NC: d.NC, Journal: d.Journal, ApprovalURL: link})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv, err := gwmcp.NewServer(g, gwmcp.Options{Version: "test", ElicitApprovals: true, ElicitWait: 30 * time.Second})
	require.NoError(t, err)
	connect := func(t *testing.T, handler func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)) *sdk.ClientSession {
		st, ct := sdk.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		opts := &sdk.ClientOptions{}
		if handler != nil {
			opts.ElicitationHandler = handler
			opts.Capabilities = &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}}
		}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, opts).Connect(context.Background(), ct, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}

	var asked []*sdk.ElicitParams
	approving := connect(t, func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked = append(asked, req.Params)
		// The user opens the page; an approver decides there.
		if _, err := d.Approvals.Decide(ctx, "alice", req.Params.ElicitationID, journal.VoteApprove, "confirmed with the customer"); err != nil {
			return nil, err
		}
		return &sdk.ElicitResult{Action: "accept"}, nil
	})
	a := call(t, approving, "payment_charge", chargeArgs("elicit-1", "order-e1", 125000))
	require.Equal(t, gateway.StatusSucceeded, a.Status, "%+v", a)
	require.Len(t, asked, 1)
	key := daemontest.Env + ":payment.charge:elicit-1:v1"
	require.Equal(t, "url", asked[0].Mode)
	require.Equal(t, link(key), asked[0].URL)
	require.Equal(t, key, asked[0].ElicitationID)
	require.Contains(t, asked[0].Message, "waits for a person's approval")
	require.Equal(t, 1, d.YooKassa.TotalEffects())

	declining := connect(t, func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		return &sdk.ElicitResult{Action: "decline"}, nil
	})
	a = call(t, declining, "payment_charge", chargeArgs("elicit-2", "order-e2", 125000))
	require.Equal(t, answer.AwaitApproval, a.NextAction, "%+v", a)
	require.Equal(t, link(daemontest.Env+":payment.charge:elicit-2:v1"), a.Approval.URL)

	// The requestState is signed, bound to the intent and used once: a
	// client that handles the round trip itself gets it, its first accept
	// is trusted (the call waits for the decision), a replay of the same
	// state, or one carried to another intent, is not (answered at once).
	raw := connectRaw(t, srv)
	first, err := raw.CallTool(context.Background(), &sdk.CallToolParams{Name: "payment_charge", Arguments: chargeArgs("elicit-4", "order-e4", 125000)})
	require.NoError(t, err)
	require.True(t, first.NeedsInput(), "input_required with the elicitation")
	require.NotEmpty(t, first.RequestState)
	require.Contains(t, first.InputRequests, "approval")
	accept := func(intent, order, state string) gateway.Answer {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := raw.CallTool(ctx, &sdk.CallToolParams{Name: "payment_charge", Arguments: chargeArgs(intent, order, 125000),
			InputResponses: sdk.InputResponseMap{"approval": &sdk.ElicitResult{Action: "accept"}}, RequestState: state})
		require.NoError(t, err, "answered before the call's 20 s deadline (the elicitation wait is 30 s)")
		return answerOf(t, res)
	}
	key4 := daemontest.Env + ":payment.charge:elicit-4:v1"
	go func() {
		time.Sleep(500 * time.Millisecond) // the person decides while the accepted call waits
		_, _ = d.Approvals.Decide(context.Background(), "alice", key4, journal.VoteApprove, "confirmed")
	}()
	a = accept("elicit-4", "order-e4", first.RequestState)
	require.Equal(t, gateway.StatusSucceeded, a.Status, "the first accept is trusted: the call waited for the decision: %+v", a)
	second, err := raw.CallTool(context.Background(), &sdk.CallToolParams{Name: "payment_charge", Arguments: chargeArgs("elicit-5", "order-e5", 125000)})
	require.NoError(t, err)
	require.True(t, second.NeedsInput(), "another waiting intent")
	a = accept("elicit-5", "order-e5", first.RequestState)
	require.Equal(t, answer.AwaitApproval, a.NextAction, "a state carried to another intent is not trusted: %+v", a)
	a = accept("elicit-5", "order-e5", second.RequestState+"x")
	require.Equal(t, answer.AwaitApproval, a.NextAction, "a forged state is not trusted")

	plain := connect(t, nil)
	a = call(t, plain, "payment_charge", chargeArgs("elicit-3", "order-e3", 125000))
	require.Equal(t, answer.AwaitApproval, a.NextAction, "%+v", a)
	require.Len(t, asked, 1, "a client without elicitation is never asked")
	require.Equal(t, 2, d.YooKassa.TotalEffects(), "nothing charged without a decision")
}

// connectRaw connects a client that declares URL elicitation and handles
// the multi round trip itself (the SDK's automatic one disabled).
func connectRaw(t *testing.T, srv *sdk.Server) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	opts := &sdk.ClientOptions{MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "raw-agent", Version: "1"}, opts).Connect(context.Background(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}
