package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/wire"
)

// TestUnroutedTypeIsNeitherOfferedNorLeftWaiting: a gateway told the
// daemon's routes offers only those types; a call of another registered
// type is answered at once that no adapter serves it here (a person must
// route it), nothing is published, and a lookup of its key says the same
// instead of "call again".
func TestUnroutedTypeIsNeitherOfferedNorLeftWaiting(t *testing.T) {
	d := daemontest.Start(t, daemontest.SQLite)
	// A bound long enough that a call left waiting would answer pending.
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 2 * time.Second, PollAfter: 100 * time.Millisecond},
		gateway.Deps{NC: d.NC, Journal: d.Journal, Routed: d.Routes})
	require.NoError(t, err)
	t.Cleanup(g.Close)

	var offered []string
	for _, typ := range g.Types() {
		offered = append(offered, typ.Name)
	}
	require.Equal(t, []string{"payment.charge", "payment.refund"}, offered)
	require.True(t, g.Known("invoice.create"), "registered, only not served here")

	ctx := context.Background()
	a := g.Submit(ctx, gateway.Request{Operation: "invoice.create", IntentID: "inv-1",
		Payload: json.RawMessage(`{"order_id":"o-1","customer_id":"c-1","amount_minor":100,"currency":"RUB"}`)})
	require.Equal(t, gateway.StatusRejected, a.Status, "%+v", a)
	require.Equal(t, gateway.CodeNotRouted, a.ErrorCode)
	require.Equal(t, gateway.HumanReview, a.NextAction)
	require.Equal(t, "test:invoice.create:inv-1:v1", a.OperationKey)
	require.Contains(t, a.Reason, "No adapter serves invoice.create on this deployment")
	require.True(t, a.IsError())

	st, err := d.JS.Stream(ctx, wire.CommandsStream)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing published for a type no replica here serves")
	_, err = d.Journal.Get(ctx, a.OperationKey)
	require.ErrorIs(t, err, journal.ErrNotFound)

	for _, l := range []gateway.Answer{g.Lookup(ctx, a.OperationKey, true), g.LookupIntent(ctx, "invoice.create", "inv-1", false)} {
		require.Equal(t, gateway.StatusNotFound, l.Status, "%+v", l)
		require.Equal(t, gateway.CodeNotRouted, l.ErrorCode)
		require.Equal(t, gateway.HumanReview, l.NextAction, "not retry_same_intent: calling again cannot help")
	}

	// The routed types work as before.
	ok := g.Submit(ctx, gateway.Request{Operation: "payment.charge", IntentID: "pay-1", ApprovalID: "appr-1", Payload: charge("order-1", 100)})
	require.Equal(t, gateway.StatusSucceeded, ok.Status, "%+v", ok)

	_, err = gateway.New(gateway.Config{Env: daemontest.Env}, gateway.Deps{NC: d.NC, Journal: d.Journal, Routed: []string{"payment.teleport"}})
	require.ErrorContains(t, err, `routed operation "payment.teleport" is not registered`)
}

// TestLostAnswerSettlesWithinTheDefaultWait: YooKassa takes the charge and
// its answer is lost until the call times out. With the wait left to its
// default — derived from the daemon's call_timeout — the call is answered
// with the payment the lookup found, not pending a moment before it.
func TestLostAnswerSettlesWithinTheDefaultWait(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			d := daemontest.Start(t, engine)
			cfg := gateway.Config{Env: daemontest.Env, CallTimeout: d.Worker.CallTimeout}.WithDefaults()
			require.Equal(t, gateway.CoverWait(d.Worker.CallTimeout), cfg.Wait)
			g, err := gateway.New(cfg, gateway.Deps{NC: d.NC, Journal: d.Journal, Routed: d.Routes})
			require.NoError(t, err)
			t.Cleanup(g.Close)
			require.NoError(t, d.YooKassa.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1}))
			a := g.Submit(context.Background(), gateway.Request{Operation: "payment.charge", IntentID: "lost-wait", ApprovalID: "appr-1",
				Payload: charge("order-lost", 99000)})
			require.Equal(t, gateway.StatusSucceeded, a.Status, "%+v", a)
			require.NotEmpty(t, a.TargetObjectID)
			require.Equal(t, 1, d.YooKassa.TotalEffects())
		})
	}
}
