package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/redact"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/worker"
)

type bundle struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	client  *producer.Client
	ncfg    consumer.Config
	sandbox *sbyookassa.Server
}

// setup starts an embedded JetStream server and a client; with daemon, also
// the real worker on a SQLite journal, serving payment.charge from the
// YooKassa sandbox (invoice.create is left unrouted).
func setup(t *testing.T, daemon bool) *bundle {
	t.Helper()
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	cl, err := producer.New(nc, "")
	require.NoError(t, err)
	b := &bundle{nc: nc, js: js, client: cl, ncfg: consumer.Config{FetchWait: 50 * time.Millisecond}.WithDefaults()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = consumer.Ensure(ctx, js, b.ncfg)
	require.NoError(t, err)
	if daemon {
		b.startDaemon(t)
	}
	return b
}

// startDaemon runs the real worker on a SQLite journal, serving
// payment.charge from the YooKassa sandbox (invoice.create is left
// unrouted).
func (b *bundle) startDaemon(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := b.js.Consumer(ctx, b.ncfg.CommandsStream, b.ncfg.Durable)
	require.NoError(t, err)
	b.sandbox = sbyookassa.New(sbyookassa.Options{})
	url, err := b.sandbox.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.sandbox.Close() })
	shop, secret := b.sandbox.Credentials()
	ad, err := yookassa.New(yookassa.Config{BaseURL: url, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}})
	require.NoError(t, err)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	w, err := worker.New(worker.Config{Owner: "producer-test"}, b.ncfg, worker.Deps{
		Store: st, JS: b.js, NC: b.nc, Consumer: cons, Decoder: &operation.Decoder{Env: "test"},
		Adapters: map[string]adapters.Adapter{"payment.charge": ad},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
}

func charge(event string) operation.Command {
	return operation.Command{EventID: event, Operation: "payment.charge", ApprovalID: "appr-1",
		Payload: json.RawMessage(`{"account_id":"merchant-account-17","order_id":"order-` + event + `","amount_minor":125000,"currency":"RUB"}`)}
}

func key(event string) string { return "test:payment.charge:" + event + ":v1" }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestPublish: a command goes to idemgate.cmd.<operation> with its event id
// as Nats-Msg-Id, so a repeat is a JetStream duplicate and stored once.
func TestPublish(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	cmd := charge("evt-p1")
	ack, err := b.client.Publish(ctx(t), cmd)
	require.NoError(t, err)
	require.False(t, ack.Duplicate)
	require.Equal(t, b.ncfg.CommandsStream, ack.Stream)
	st, err := b.js.Stream(ctx(t), b.ncfg.CommandsStream)
	require.NoError(t, err)
	m, err := st.GetMsg(ctx(t), ack.Sequence)
	require.NoError(t, err)
	require.Equal(t, "idemgate.cmd.payment.charge", m.Subject)
	require.Equal(t, "evt-p1", m.Header.Get("Nats-Msg-Id"))
	var got operation.Command
	require.NoError(t, json.Unmarshal(m.Data, &got))
	require.Equal(t, cmd.EventID, got.EventID)
	require.JSONEq(t, string(cmd.Payload), string(got.Payload))

	again, err := b.client.Publish(ctx(t), cmd)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, ack.Sequence, again.Sequence)
	info, err := st.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)

	_, err = b.client.Publish(ctx(t), operation.Command{Operation: "payment.charge"})
	require.ErrorIs(t, err, producer.ErrNoEventID)
	_, err = b.client.Publish(ctx(t), operation.Command{EventID: "evt-x"})
	require.ErrorContains(t, err, "no operation")
}

// TestPublishWithoutStream: with no stream for commands the publish fails at
// once with ErrNoStream.
func TestPublishWithoutStream(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	nc, _ := ns.Connect(t)
	cl, err := producer.New(nc, "")
	require.NoError(t, err)
	_, err = cl.Publish(ctx(t), charge("evt-nostream"))
	require.ErrorIs(t, err, producer.ErrNoStream)
	_, err = cl.PublishAndWait(ctx(t), charge("evt-nostream"), key("evt-nostream"), nil)
	require.ErrorIs(t, err, producer.ErrNoStream)
}

// TestPublishAndWait against the real worker: the result comes back; a
// JetStream duplicate, sent right after, gets the stored result (replayed)
// whether or not it was in the results stream yet; the same intent under a
// new event id is replayed by the daemon; one effect per intent in the
// target throughout.
func TestPublishAndWait(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	for _, ev := range []string{"evt-w1", "evt-w2", "evt-w3", "evt-w4", "evt-w5"} {
		first, err := b.client.PublishAndWait(ctx(t), charge(ev), key(ev), nil)
		require.NoError(t, err)
		require.Equal(t, operation.ResultSucceeded, first.Status, "%+v", first)
		require.Equal(t, key(ev), first.OperationKey)
		require.NotEmpty(t, first.TargetObjectID)

		dup, err := b.client.PublishAndWait(ctx(t), charge(ev), key(ev), nil)
		require.NoError(t, err)
		require.Equal(t, operation.ResultSucceeded, dup.Status)
		require.Equal(t, first.TargetObjectID, dup.TargetObjectID)
		require.True(t, dup.Replayed)
	}
	retry := charge("evt-w1") // the same intent and payload, sent again under a new event id
	retry.EventID, retry.IntentID = "evt-w1-retry", "evt-w1"
	r, err := b.client.PublishAndWait(ctx(t), retry, key("evt-w1"), nil)
	require.NoError(t, err)
	require.Equal(t, operation.ResultSucceeded, r.Status)
	require.True(t, r.Replayed, "%+v", r)
	require.Equal(t, 5, b.sandbox.TotalEffects(), "one charge per intent")
}

// TestPublishAndWaitRejected: a command the daemon refuses is answered
// "rejected" on the reply subject, with a key or without one.
func TestPublishAndWaitRejected(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	bad := charge("evt-r1")
	bad.Payload = json.RawMessage(`{"account_id":"merchant-account-17","order_id":"order-1","currency":"RUB"}`)
	r, err := b.client.PublishAndWait(ctx(t), bad, key("evt-r1"), nil)
	require.NoError(t, err)
	require.Equal(t, operation.ResultRejected, r.Status)
	require.Equal(t, string(operation.CodeMissingField), r.ErrorCode)
	require.Equal(t, key("evt-r1"), r.OperationKey)

	unknown := operation.Command{EventID: "evt-r2", Operation: "payment.teleport", Payload: json.RawMessage(`{}`)}
	r, err = b.client.PublishAndWait(ctx(t), unknown, "", nil)
	require.NoError(t, err)
	require.Equal(t, operation.ResultRejected, r.Status)
	require.Equal(t, string(operation.CodeUnknownOperation), r.ErrorCode)
	require.Empty(t, r.OperationKey)
	require.NotZero(t, r.CommandSeq)
	require.Zero(t, b.sandbox.TotalEffects())
}

// TestPublishAndWaitTimesOut: with no daemon serving the operation, the wait
// ends with the context as a *WaitError naming the key and where the
// command is stored.
func TestPublishAndWaitTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	cmd := operation.Command{EventID: "evt-t1", Operation: "invoice.create",
		Payload: json.RawMessage(`{"order_id":"order-1","customer_id":"c-1","amount_minor":100,"currency":"RUB"}`)}
	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := b.client.PublishAndWait(c, cmd, "test:invoice.create:evt-t1:v1", nil)
	var we *producer.WaitError
	require.True(t, errors.As(err, &we), "%v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, "test:invoice.create:evt-t1:v1", we.Key)
	require.Equal(t, b.ncfg.CommandsStream, we.Stream)
	require.NotZero(t, we.Seq)
	require.Nil(t, we.Pending)
	require.Contains(t, err.Error(), "no result for test:invoice.create:evt-t1:v1")
}

// TestPublishAndWaitIgnoresOtherCommandsResults: a command JetStream stores
// as new is answered on its own inbox; a result for the same key published
// meanwhile on the results subject (another command's: a retry's replay, a
// first payload's outcome) is not taken for its answer.
func TestPublishAndWaitIgnoresOtherCommandsResults(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	const key = "test:payment.charge:order-x:v1"
	cmd := operation.Command{EventID: "evt-x-changed", IntentID: "order-x", Operation: "payment.charge", ApprovalID: "appr-1",
		Payload: json.RawMessage(`{"account_id":"merchant-account-17","order_id":"order-x","amount_minor":2000,"currency":"RUB"}`)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go func() {
		// Another command's result for the key, while this one waits.
		for range 10 {
			time.Sleep(100 * time.Millisecond)
			_ = consumer.PublishResult(ctx, b.js, operation.Result{OperationKey: key, EventID: "evt-x-first",
				Operation: "payment.charge", Status: operation.ResultSucceeded, TargetObjectID: "pay-1"})
		}
	}()
	r, err := b.client.PublishAndWait(ctx, cmd, key, nil)
	var we *producer.WaitError
	require.True(t, errors.As(err, &we), "answered with another command's result: %+v", r)
	require.False(t, we.Duplicate)
}

// TestMsgIDNamesTheApprovalToken: a copy of a command is the same message;
// a changed payload, or the same request with another approval token (the
// way to recover from a refused one), is another; the id names a token by
// a digest, never by itself.
func TestMsgIDNamesTheApprovalToken(t *testing.T) {
	dec := &operation.Decoder{Env: "test"}
	op := func(amount int, token string) operation.Operation {
		o, err := dec.DecodeCommand(operation.Command{EventID: "msgid-1", Operation: "payment.charge", IntentID: "msgid-1",
			ApprovalToken: token, Payload: json.RawMessage(fmt.Sprintf(`{"account_id":"a-1","order_id":"o-1","amount_minor":%d,"currency":"RUB"}`, amount))})
		require.NoError(t, err)
		return o
	}
	const tokA, tokB = "eyJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJhIn0.c2lnbmF0dXJlLWE", "eyJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJiIn0.c2lnbmF0dXJlLWI"
	require.Equal(t, producer.MsgID(op(100, "")), producer.MsgID(op(100, "")), "a copy")
	require.NotEqual(t, producer.MsgID(op(100, "")), producer.MsgID(op(101, "")), "a changed payload")
	require.Equal(t, producer.MsgID(op(100, tokA)), producer.MsgID(op(100, tokA)), "a copy with its token")
	require.NotEqual(t, producer.MsgID(op(100, tokA)), producer.MsgID(op(100, tokB)), "another token")
	require.NotEqual(t, producer.MsgID(op(100, "")), producer.MsgID(op(100, tokA)), "a token added")
	for _, tok := range []string{tokA, tokB} {
		id := producer.MsgID(op(100, tok))
		require.NotContains(t, id, tok)
		require.NotContains(t, id, "c2lnbmF0dXJl", "no part of the token's signature")
		require.True(t, strings.HasPrefix(id, op(100, tok).Key.String()+"#"), id)
	}
}
