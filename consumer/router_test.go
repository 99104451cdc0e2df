package consumer

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// TestRouterSettlesEachDeliveryAfterItsResult: the handler answers, rejects
// or brings back each command; the Router publishes each result (with its
// Nats-Msg-Id, and to the reply subject), then acks or terminates, and a
// nak comes back as a second delivery. Hooks see fetches, settlements,
// results and the pending counts.
func TestRouterSettlesEachDeliveryAfterItsResult(t *testing.T) {
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	c := Config{AckWait: 5 * time.Second, FetchWait: 50 * time.Millisecond}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := Ensure(ctx, js, c)
	require.NoError(t, err)

	replies := make(chan *nats.Msg, 10)
	sub, err := nc.ChanSubscribe("agent.inbox", replies)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()

	var mu sync.Mutex
	var fetched, settled int
	published := map[operation.ResultStatus]int{}
	pendingSeen := make(chan struct{}, 1)
	hooks := Hooks{
		Fetched:   func(n int) { mu.Lock(); fetched += n; mu.Unlock() },
		Settled:   func(time.Duration) { mu.Lock(); settled++; mu.Unlock() },
		Published: func(s operation.ResultStatus) { mu.Lock(); published[s]++; mu.Unlock() },
		Pending: func(u, a uint64) {
			select {
			case pendingSeen <- struct{}{}:
			default:
			}
		},
	}
	r := NewRouter(c, RouterConfig{MaxInFlight: 10, Handlers: 2, PendingEvery: 50 * time.Millisecond}, cons, js, nc, nil, hooks)

	deliveries := make(chan uint64, 10) // of "later", each time it comes
	r.Start(ctx, func(ds []*Delivery) {
		for _, d := range ds {
			op, ok := d.Operation()
			assert.True(t, ok)
			assert.Equal(t, "payment.charge", op)
			key := "test:payment.charge:" + d.Header(wire.HeaderMsgID) + ":v1"
			switch string(d.Data()) {
			case "answer":
				d.Answer(operation.Result{OperationKey: key, Operation: op, Status: operation.ResultSucceeded})
			case "reject":
				d.Reject(operation.Result{Operation: op, Status: operation.ResultRejected, CommandSeq: d.StreamSeq()}, "not_json")
			case "later":
				n := d.Deliveries()
				deliveries <- n
				if n == 1 {
					d.AnswerThenNak(operation.Result{OperationKey: key, Operation: op, Status: operation.ResultPending}, 10*time.Millisecond)
				} else {
					d.Answer(operation.Result{OperationKey: key, Operation: op, Status: operation.ResultSucceeded})
				}
			}
		}
	})
	publish := func(id, body string, replyTo string) {
		m := nats.NewMsg(wire.CommandSubject("payment.charge"))
		m.Data = []byte(body)
		m.Header.Set(wire.HeaderMsgID, id)
		if replyTo != "" {
			m.Header.Set(wire.HeaderReplyTo, replyTo)
		}
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	publish("evt-a", "answer", "agent.inbox")
	publish("evt-r", "reject", "")
	publish("evt-l", "later", "")

	require.Equal(t, uint64(1), <-deliveries)
	require.Equal(t, uint64(2), <-deliveries, "a nak brings the command back")
	select {
	case m := <-replies:
		var res operation.Result
		require.NoError(t, json.Unmarshal(m.Data, &res))
		require.Equal(t, "test:payment.charge:evt-a:v1", res.OperationKey, "the reply subject gets the result")
	case <-time.After(30 * time.Second):
		t.Fatal("no reply")
	}
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	}, 30*time.Second, 20*time.Millisecond, "every command acked or terminated")
	<-pendingSeen

	r.StopFetching()
	require.NoError(t, r.Drain(ctx))
	r.Close()

	// Each result is in the results stream under its Nats-Msg-Id.
	st, err := js.Stream(ctx, c.ResultsStream)
	require.NoError(t, err)
	ids := map[string]bool{}
	for seq := uint64(1); ; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			break
		}
		ids[raw.Header.Get(wire.HeaderMsgID)] = true
	}
	require.Equal(t, map[string]bool{
		"test:payment.charge:evt-a:v1:succeeded": true,
		"_rejected:2":                            true,
		"test:payment.charge:evt-l:v1:pending":   true,
		"test:payment.charge:evt-l:v1:succeeded": true,
	}, ids)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 4, fetched, "three commands, one of them twice")
	require.Equal(t, 4, settled)
	require.Equal(t, map[operation.ResultStatus]int{operation.ResultSucceeded: 2, operation.ResultRejected: 1, operation.ResultPending: 1}, published)
}

// TestRouterHandsOnCommandsAsTheyArrive: a fetch stays open for FetchWait
// (here 16 s) while its batch is not full, but the commands it brings
// reach the handler as they arrive, not when the fetch ends: each of
// three commands published one by one, with the handler's answer awaited
// in between, is handled within half of that (the fetch open since the
// start would end only after FetchWait).
func TestRouterHandsOnCommandsAsTheyArrive(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	c := Config{AckWait: 5 * time.Minute, FetchWait: 16 * time.Second}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cons, err := Ensure(ctx, js, c)
	require.NoError(t, err)
	r := NewRouter(c, RouterConfig{MaxInFlight: 100, Handlers: 1}, cons, js, nc, nil, Hooks{})
	handled := make(chan string, 10)
	r.Start(ctx, func(ds []*Delivery) {
		for _, d := range ds {
			handled <- string(d.Data())
			d.Answer(operation.Result{OperationKey: "test:payment.charge:" + string(d.Data()) + ":v1", Operation: "payment.charge",
				Status: operation.ResultSucceeded})
		}
	})
	for _, id := range []string{"evt-1", "evt-2", "evt-3"} {
		_, err := js.Publish(ctx, wire.CommandSubject("payment.charge"), []byte(id))
		require.NoError(t, err)
		select {
		case got := <-handled:
			require.Equal(t, id, got)
		case <-time.After(8 * time.Second):
			t.Fatalf("%s not handled while the fetch stays open", id)
		}
	}
	r.StopFetching()
	require.NoError(t, r.Drain(ctx))
	r.Close()
}
