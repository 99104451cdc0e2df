package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
)

func charge(order string, amount int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"account_id":"merchant-account-17","order_id":%q,"amount_minor":%d,"currency":"rub"}`, order, amount))
}

func newGateway(t *testing.T, d *daemontest.Daemon, cfg gateway.Config) *gateway.Gateway {
	t.Helper()
	cfg.Env = daemontest.Env
	if cfg.Wait == 0 {
		cfg.Wait = 20 * time.Second
	}
	// The gateway is handed the reads it declares (gateway.Journal) and
	// nothing more: it cannot reach the journal's writes.
	g, err := gateway.New(cfg, gateway.Deps{NC: d.NC, Journal: struct{ gateway.Journal }{d.Journal}})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	return g
}

// TestSubmit: one intent called twice is one charge in the YooKassa
// ledger, the second answered from the stored outcome; a changed amount is
// a conflict with no charge; bad input is rejected before anything is
// published. On both journals.
func TestSubmit(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			d := daemontest.Start(t, engine)
			g := newGateway(t, d, gateway.Config{})
			ctx := context.Background()
			req := gateway.Request{Operation: "payment.charge", IntentID: "intent-1", ApprovalID: "appr-1", Payload: charge("order-1", 125000)}

			first := g.Submit(ctx, req)
			require.Equal(t, gateway.StatusSucceeded, first.Status, "%+v", first)
			require.Equal(t, gateway.Done, first.NextAction)
			require.False(t, first.Replayed)
			require.Equal(t, "test:payment.charge:intent-1:v1", first.OperationKey)
			require.NotEmpty(t, first.TargetObjectID)
			require.False(t, first.IsError())

			again := g.Submit(ctx, req)
			require.Equal(t, gateway.StatusSucceeded, again.Status, "%+v", again)
			require.True(t, again.Replayed)
			require.Equal(t, gateway.Done, again.NextAction)
			require.Equal(t, first.TargetObjectID, again.TargetObjectID)
			require.Equal(t, 1, d.YooKassa.TotalEffects(), "one charge in the ledger")

			changed := req
			changed.Payload = charge("order-1", 500000)
			for i := range 2 { // the daemon answers the first, the journal the repeat
				c := g.Submit(ctx, changed)
				require.Equal(t, gateway.StatusConflict, c.Status, "call %d: %+v", i, c)
				require.Equal(t, gateway.NewIntentRequired, c.NextAction)
				require.Equal(t, gateway.CodeKeyPayloadMismatch, c.ErrorCode)
				require.True(t, c.IsError())
				require.Contains(t, c.Reason, "a separate, additional payment, sent as a new intent (a new intent_id) and, where the policy says so, approved by a person on its own")
				require.Equal(t, &operation.Existing{Status: operation.ResultSucceeded, TargetObjectID: first.TargetObjectID}, c.Existing,
					"call %d: the first request's outcome", i)
				require.Contains(t, c.Reason, "The first request succeeded: the payment provider holds object "+first.TargetObjectID+", and that money has moved.")
				require.Equal(t, []string{"amount_minor"}, c.ConflictFields, "call %d", i)
				require.Contains(t, c.Reason, "amount_minor differs from the first request for this intent")
			}
			require.Equal(t, 1, d.YooKassa.TotalEffects(), "a conflict charges nothing")

			bad := g.Submit(ctx, gateway.Request{Operation: "payment.charge", IntentID: "intent-2", ApprovalID: "appr-1",
				Payload: json.RawMessage(`{"account_id":"a","order_id":"o","amount_minor":12.5,"currency":"RUB"}`)})
			require.Equal(t, gateway.StatusRejected, bad.Status)
			require.Equal(t, gateway.FixInput, bad.NextAction)
			require.Equal(t, "invalid_field", bad.ErrorCode)
			require.Contains(t, bad.Reason, "payload.amount_minor")
			_, err := d.Journal.Get(ctx, "test:payment.charge:intent-2:v1")
			require.ErrorIs(t, err, journal.ErrNotFound, "a rejected command is never published")

			noIntent := g.Submit(ctx, gateway.Request{Operation: "payment.charge", ApprovalID: "appr-1", Payload: charge("o", 1)})
			require.Equal(t, gateway.StatusRejected, noIntent.Status)
			require.Contains(t, noIntent.Reason, "intent_id")

			secret := g.Submit(ctx, gateway.Request{Operation: "payment.charge", IntentID: "4111 1111 1111 1111", ApprovalID: "a",
				Payload: charge("o", 1)})
			require.Equal(t, gateway.StatusRejected, secret.Status)
			require.Contains(t, secret.Reason, "intent_id:")
			require.NotContains(t, secret.Reason, "4111")

			// approval_id is an optional reference that authorises nothing:
			// whether a charge waits for a person is the approval policy's
			// (off in this daemon), never the command's.
			noApproval := g.Submit(ctx, gateway.Request{Operation: "payment.charge", IntentID: "intent-3", Payload: charge("o", 1)})
			require.Equal(t, gateway.StatusSucceeded, noApproval.Status, noApproval.Reason)
		})
	}
}

// TestSubmitLostResponse: YooKassa takes the charge and the answer never
// comes. The call answers pending (poll) past its bound; the journal then
// settles it by looking the payment up by key: one charge.
func TestSubmitLostResponse(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			d := daemontest.Start(t, engine)
			g := newGateway(t, d, gateway.Config{Wait: 300 * time.Millisecond, PollAfter: 250 * time.Millisecond})
			require.NoError(t, d.YooKassa.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1}))
			ctx := context.Background()
			a := g.Submit(ctx, gateway.Request{Operation: "payment.charge", IntentID: "lost-1", ApprovalID: "appr-1", Payload: charge("order-2", 99000)})
			require.Equal(t, gateway.StatusPending, a.Status, "%+v", a)
			require.Equal(t, gateway.Poll, a.NextAction)
			require.Equal(t, int64(250), a.RetryAfterMS)
			require.Equal(t, "test:payment.charge:lost-1:v1", a.OperationKey)
			require.False(t, a.IsError())

			got := pollUntilFinal(t, g, a.OperationKey)
			require.Equal(t, gateway.StatusSucceeded, got.Status, "%+v", got)
			require.Equal(t, gateway.Done, got.NextAction)
			require.Equal(t, string(journal.StatusSucceeded), got.JournalStatus)
			kinds := map[string]int{}
			for _, s := range got.Trail {
				kinds[s.Kind]++
			}
			require.Equal(t, 1, kinds["execute"], "one call: %+v", got.Trail)
			require.GreaterOrEqual(t, kinds["reconcile"], 1, "settled by a lookup: %+v", got.Trail)
			require.Equal(t, 1, d.YooKassa.TotalEffects())

			again := g.Submit(ctx, gateway.Request{Operation: "payment.charge", IntentID: "lost-1", ApprovalID: "appr-1", Payload: charge("order-2", 99000)})
			require.Equal(t, got.TargetObjectID, again.TargetObjectID)
			require.True(t, again.Replayed)
			require.Equal(t, 1, d.YooKassa.TotalEffects())
		})
	}
}

func pollUntilFinal(t *testing.T, g *gateway.Gateway, key string) gateway.Answer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := g.Lookup(context.Background(), key, true)
		if a.Status != gateway.StatusPending || time.Now().After(deadline) {
			return a
		}
		time.Sleep(time.Duration(a.RetryAfterMS) * time.Millisecond) // what the agent is told to do
	}
}

// TestSubmitConcurrent: 20 calls of one intent at once make one charge, and
// all 20 answers name the same payment.
func TestSubmitConcurrent(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			d := daemontest.Start(t, engine)
			g := newGateway(t, d, gateway.Config{})
			req := gateway.Request{Operation: "payment.charge", IntentID: "race-1", ApprovalID: "appr-1", Payload: charge("order-3", 4200)}
			answers := make([]gateway.Answer, 20)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					answers[i] = g.Submit(context.Background(), req)
				}()
			}
			wg.Wait()
			replayed := 0
			for i, a := range answers {
				require.Equal(t, gateway.StatusSucceeded, a.Status, "call %d: %+v", i, a)
				require.Equal(t, answers[0].TargetObjectID, a.TargetObjectID)
				if a.Replayed {
					replayed++
				}
			}
			// All but the first were answered with its outcome. The first
			// may be told "replayed" too: on a loaded machine its command
			// can be redelivered, and the copy's answer (read from the
			// settled row) can reach the caller before the first delivery's.
			require.GreaterOrEqual(t, replayed, 19, "all but the first were answered with its outcome")
			require.Equal(t, 1, d.YooKassa.TotalEffects())
		})
	}
}

// TestLookup: by key and by intent, unknown keys, malformed keys.
func TestLookup(t *testing.T) {
	d := daemontest.Start(t, daemontest.SQLite)
	g := newGateway(t, d, gateway.Config{})
	ctx := context.Background()
	a := g.Submit(ctx, gateway.Request{Operation: "payment.charge", IntentID: "look-1", ApprovalID: "appr-1", Payload: charge("order-4", 100)})
	require.Equal(t, gateway.StatusSucceeded, a.Status)

	byIntent := g.LookupIntent(ctx, "payment.charge", "look-1", false)
	require.Equal(t, a.TargetObjectID, byIntent.TargetObjectID)
	require.Equal(t, gateway.Done, byIntent.NextAction)
	require.Empty(t, byIntent.Trail)

	none := g.Lookup(ctx, "test:payment.charge:nobody:v1", false)
	require.Equal(t, gateway.StatusNotFound, none.Status)
	require.Equal(t, gateway.RetrySameIntent, none.NextAction)

	bad := g.Lookup(ctx, "not a key", false)
	require.Equal(t, gateway.StatusRejected, bad.Status)
	require.Equal(t, gateway.FixInput, bad.NextAction)

	// invoice.create has no adapter on this daemon: the command waits in
	// JetStream, and a lookup says queued rather than unknown.
	short := newGateway(t, d, gateway.Config{Wait: 200 * time.Millisecond})
	q := short.Submit(ctx, gateway.Request{Operation: "invoice.create", IntentID: "queued-1",
		Payload: json.RawMessage(`{"order_id":"o-1","customer_id":"c-1","amount_minor":100,"currency":"RUB"}`)})
	require.Equal(t, gateway.StatusPending, q.Status, "%+v", q)
	require.Contains(t, q.Reason, "queued")
	lq := short.Lookup(ctx, q.OperationKey, false)
	require.Equal(t, gateway.StatusPending, lq.Status)
	require.Equal(t, gateway.Poll, lq.NextAction)
	require.Contains(t, lq.Reason, "queued")
	require.Equal(t, gateway.StatusNotFound, g.Lookup(ctx, q.OperationKey, false).Status, "another gateway never sent it")

	unknownOp := g.LookupIntent(ctx, "payment.teleport", "x", false)
	require.Equal(t, gateway.StatusRejected, unknownOp.Status)
	require.Equal(t, "unknown_operation", unknownOp.ErrorCode)
}

// TestSubmitUnavailable: with JetStream gone the call is refused in words
// that say a retry with the same intent is safe; nothing is charged.
func TestSubmitUnavailable(t *testing.T) {
	d := daemontest.Start(t, daemontest.SQLite)
	g := newGateway(t, d, gateway.Config{PublishTimeout: 500 * time.Millisecond})
	d.NATS.Shutdown()
	a := g.Submit(context.Background(), gateway.Request{Operation: "payment.charge", IntentID: "down-1", ApprovalID: "appr-1", Payload: charge("order-5", 100)})
	require.Equal(t, gateway.StatusUnavailable, a.Status, "%+v", a)
	require.Equal(t, gateway.RetrySameIntent, a.NextAction)
	require.Positive(t, a.RetryAfterMS)
	require.Equal(t, 0, d.YooKassa.TotalEffects())
}

// TestSubmitAnswersTheDaemonsKeylessRejection: a type the gateway knows
// but the daemon does not (their declared types differ) is rejected by the
// daemon before it derives a key; that rejection, sent to the call's own
// reply subject, is the call's answer, not something to wait past.
func TestSubmitAnswersTheDaemonsKeylessRejection(t *testing.T) {
	d := daemontest.Start(t, daemontest.SQLite)
	reg := operation.DefaultRegistry()
	require.NoError(t, reg.Register(operation.Type{Name: "crm.note.add", TargetSystem: "crm",
		Fields: []operation.Field{{Name: "text", Kind: operation.KindString, Required: true}}}))
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 20 * time.Second}, gateway.Deps{NC: d.NC, Journal: d.Journal, Registry: reg})
	require.NoError(t, err)
	t.Cleanup(g.Close)

	a := g.Submit(context.Background(), gateway.Request{Operation: "crm.note.add", IntentID: "note-1", Payload: json.RawMessage(`{"text":"call back"}`)})
	require.Equal(t, gateway.StatusRejected, a.Status, "%+v", a)
	require.Equal(t, string(operation.CodeUnknownOperation), a.ErrorCode, "%+v", a)
	require.Equal(t, 0, d.YooKassa.TotalEffects())
}

// TestSubmitAnswersAtOnceWhileAwaitingApproval: a call whose intent waits
// for a person is answered await_approval, with the wait's end, as soon as
// the worker says so, not at the call's bound (10 minutes here; the test's
// own deadline is one minute, and a call cut short by its context would
// answer poll); a copy of the same call is answered the same way, and
// nothing reaches the provider.
func TestSubmitAnswersAtOnceWhileAwaitingApproval(t *testing.T) {
	d := daemontest.StartWith(t, daemontest.SQLite, daemontest.Options{Approvals: true})
	g := newGateway(t, d, gateway.Config{Wait: 10 * time.Minute, MaxWait: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := gateway.Request{Operation: "payment.charge", IntentID: "intent-waits", Payload: charge("order-waits", 125000)}
	for i := range 2 {
		a := g.Submit(ctx, req)
		require.NoError(t, ctx.Err(), "call %d: answered before the test's deadline", i)
		require.Equal(t, gateway.StatusPending, a.Status, "call %d: %+v", i, a)
		require.Equal(t, gateway.AwaitApproval, a.NextAction, "call %d: %+v", i, a)
		require.NotNil(t, a.Approval, "call %d: the wait's end and link", i)
		require.False(t, a.Approval.ExpiresAt.IsZero(), "call %d", i)
	}
	require.Zero(t, d.YooKassa.TotalEffects())
}

// TestTasksBucketTakesTheStreamsReplicas: the tasks bucket is made with the
// gateway's TaskReplicas (the daemon's nats.replicas), so that a task
// outlives a NATS node as its command does. On a single node, 3 replicas
// are refused by the server, which shows the setting reaches it; 1 works.
func TestTasksBucketTakesTheStreamsReplicas(t *testing.T) {
	d := daemontest.Start(t, daemontest.SQLite)
	ctx := context.Background()
	req := gateway.Request{Operation: "payment.charge", IntentID: "task-replicas", ApprovalID: "appr-1", Payload: charge("order-tr", 125000)}
	three := newGateway(t, d, gateway.Config{TaskReplicas: 3})
	_, err := three.StartTask(ctx, req)
	require.ErrorContains(t, err, "replicas", "a single node cannot keep 3 replicas: the setting reached the server")
	one := newGateway(t, d, gateway.Config{TaskReplicas: 1})
	task, err := one.StartTask(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "test:payment.charge:task-replicas:v1", task.ID)
}
