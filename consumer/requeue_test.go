package consumer

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// requeueRig is a Router with max_deliver 2 whose handler naks every
// command until answer is set, then answers it.
type requeueRig struct {
	r                 *Router
	cfg               Config
	requeued, givenUp atomic.Int32
	answer            atomic.Bool

	mu   sync.Mutex
	seen []map[string]string // per delivery: the headers the handler saw
}

func startRequeueRig(t *testing.T, ctx context.Context, ns *natstest.Server) *requeueRig {
	nc, js := ns.Connect(t)
	rig := &requeueRig{cfg: Config{AckWait: 5 * time.Second, FetchWait: 50 * time.Millisecond, MaxDeliver: 2}.WithDefaults()}
	cons, err := Ensure(ctx, js, rig.cfg)
	require.NoError(t, err)
	rig.r = NewRouter(rig.cfg, RouterConfig{MaxInFlight: 10, Handlers: 1}, cons, js, nc, nil, Hooks{
		Requeued: func() { rig.requeued.Add(1) },
		GivenUp:  func() { rig.givenUp.Add(1) },
	})
	rig.r.Start(ctx, func(ds []*Delivery) {
		for _, d := range ds {
			h := map[string]string{}
			for _, k := range []string{wire.HeaderMsgID, wire.HeaderReplyTo, wire.HeaderFirstStored, wire.HeaderRequeues, "traceparent"} {
				h[k] = d.Header(k)
			}
			rig.mu.Lock()
			rig.seen = append(rig.seen, h)
			rig.mu.Unlock()
			op, _ := d.Operation()
			key := "test:payment.charge:" + string(d.Data()) + ":v1"
			if rig.answer.Load() {
				d.Answer(operation.Result{OperationKey: key, Operation: op, Status: operation.ResultSucceeded})
			} else {
				d.Nak(10 * time.Millisecond)
			}
		}
	})
	t.Cleanup(func() {
		rig.r.StopFetching()
		_ = rig.r.Drain(context.Background())
		rig.r.Close()
	})
	return rig
}

// settledAll waits until the consumer holds nothing: every command acked
// or terminated.
func (rig *requeueRig) settledAll(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ci, err := rig.r.cons.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	}, 30*time.Second, 20*time.Millisecond, what)
}

func (rig *requeueRig) deliveries() []map[string]string {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	return append([]map[string]string(nil), rig.seen...)
}

// TestNakOnLastDeliveryRequeues: a command still naked on its last
// delivery (a journal down for longer than max_deliver backoffs) is not
// dropped: a copy with its body and headers, the time it was first stored
// and a requeue count is stored before the original is terminated, and the
// copy's deliveries answer it once the cause is gone — on the reply
// subject the agent named.
func TestNakOnLastDeliveryRequeues(t *testing.T) {
	ns := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rig := startRequeueRig(t, ctx, ns)
	nc, js := ns.Connect(t)
	replies := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe("agent.inbox", replies)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()

	m := nats.NewMsg(wire.CommandSubject("payment.charge"))
	m.Data = []byte("evt-q")
	m.Header.Set(wire.HeaderMsgID, "evt-q")
	m.Header.Set(wire.HeaderReplyTo, "agent.inbox")
	m.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ack, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)
	stream, err := js.Stream(ctx, rig.cfg.CommandsStream)
	require.NoError(t, err)
	orig, err := stream.GetMsg(ctx, ack.Sequence)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return rig.requeued.Load() >= 2 }, 30*time.Second, 10*time.Millisecond,
		"each max_deliver deliveries end in a requeue")
	rig.answer.Store(true)
	select {
	case r := <-replies:
		var res operation.Result
		require.NoError(t, json.Unmarshal(r.Data, &res))
		require.Equal(t, operation.ResultSucceeded, res.Status)
		require.Equal(t, "test:payment.charge:evt-q:v1", res.OperationKey)
	case <-time.After(30 * time.Second):
		t.Fatal("the requeued command was never answered")
	}
	require.Zero(t, rig.givenUp.Load())

	seen := rig.deliveries()
	require.GreaterOrEqual(t, len(seen), 5, "2 deliveries, a requeue, 2 more, a requeue, the answer")
	require.Equal(t, "evt-q", seen[0][wire.HeaderMsgID])
	require.Empty(t, seen[0][wire.HeaderRequeues])
	first := orig.Time.UTC().Format(time.RFC3339Nano)
	for i, h := range seen[2:] {
		require.Equal(t, "agent.inbox", h[wire.HeaderReplyTo], "delivery %d keeps the reply subject", i+2)
		require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", h["traceparent"], "and the trace")
		require.Equal(t, first, h[wire.HeaderFirstStored], "the age counts from the first store")
		require.Contains(t, h[wire.HeaderMsgID], "_requeue:"+rig.cfg.CommandsStream+":")
		require.NotEmpty(t, h[wire.HeaderRequeues])
	}
	require.Equal(t, "1", seen[2][wire.HeaderRequeues])
	require.Equal(t, "2", seen[4][wire.HeaderRequeues])

	rig.settledAll(t, ctx, "originals terminated, the last copy acked")
}

// TestNakOnLastDeliveryGivesUpPastMaxAge: a command first stored longer
// ago than nats.commands_max_age is not requeued (a copy could outlive its
// intent's journal row) but terminated and reported.
func TestNakOnLastDeliveryGivesUpPastMaxAge(t *testing.T) {
	ns := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rig := startRequeueRig(t, ctx, ns)
	_, js := ns.Connect(t)

	m := nats.NewMsg(wire.CommandSubject("payment.charge"))
	m.Data = []byte("evt-old")
	m.Header.Set(wire.HeaderMsgID, "evt-old")
	m.Header.Set(wire.HeaderFirstStored, time.Now().Add(-rig.cfg.CommandsMaxAge-time.Hour).UTC().Format(time.RFC3339Nano))
	_, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return rig.givenUp.Load() == 1 }, 30*time.Second, 10*time.Millisecond)
	rig.settledAll(t, ctx, "terminated")
	require.Zero(t, rig.requeued.Load())
	require.Len(t, rig.deliveries(), 2, "max_deliver deliveries, no copy")
}
