package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

// syncBuffer is a log sink shared by the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEveryRejectedCommandIsAnswered: a command no key can be derived for is
// still answered — one rejected result on its reply subject and one on
// idemgate.res._rejected (deduplicated by its stream sequence), with the
// reason and the command's sequence — and the offending value appears in
// neither the result nor the log.
func TestEveryRejectedCommandIsAnswered(t *testing.T) {
	t.Parallel()
	const (
		secret = "sk_live_CanaryRejectSecret42"
		card   = "4111111111111111"
	)
	charge := func(fields string) []byte {
		return []byte(`{` + fields + `,"operation":"payment.charge","approval_id":"appr-1",
			"payload":{"account_id":"merchant-account-17","order_id":"order-1","amount_minor":100,"currency":"RUB"}}`)
	}
	big := `{"event_id":"evt-big","operation":"payment.charge","approval_id":"appr-1","payload":{"account_id":"` +
		secret + `","description":"` + strings.Repeat("x", 1_000_000) + `"}}`
	cases := []struct {
		name, subject, msgID string
		body                 []byte
		code                 operation.DecodeCode
		eventID              string // expected event_id in the result
		field                string // the field the reason names, if one
	}{
		{name: "not json", subject: "payment.charge", msgID: "evt-notjson", body: []byte(`{"event_id":"evt-notjson",`),
			code: operation.CodeNotJSON, eventID: "evt-notjson"},
		{name: "not json, secret msg id", subject: "payment.charge", msgID: secret, body: []byte(`[` + secret),
			code: operation.CodeNotJSON},
		{name: "missing event_id", subject: "payment.charge", body: charge(`"key_version":"v1"`),
			code: operation.CodeMissingField, field: "event_id"},
		{name: "unknown operation", subject: "payment.teleport", msgID: "evt-teleport",
			body: []byte(`{"event_id":"evt-teleport","operation":"payment.teleport","payload":{}}`),
			code: operation.CodeUnknownOperation, eventID: "evt-teleport"},
		{name: "secret operation name", subject: "payment.charge", msgID: "evt-opname",
			body: []byte(`{"event_id":"evt-opname","operation":"` + secret + `","payload":{}}`),
			code: operation.CodeUnknownOperation, eventID: "evt-opname"},
		{name: "card number in intent_id", subject: "payment.charge", msgID: "evt-card",
			body: charge(`"event_id":"evt-card","intent_id":"order-` + card + `"`), code: operation.CodeBadKey, eventID: "evt-card", field: "intent_id"},
		{name: "secret in intent_id", subject: "payment.charge", msgID: "evt-sk",
			body: charge(`"event_id":"evt-sk","intent_id":"` + secret + `"`), code: operation.CodeBadKey, eventID: "evt-sk", field: "intent_id"},
		{name: "1 MB body", subject: "payment.charge", msgID: "evt-big", body: []byte(big),
			code: operation.CodeTooLarge, eventID: "evt-big"},
	}

	b := setup(t)
	logs := &syncBuffer{}
	b.workerWithLog(t, "w-reject", worker.Config{}, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	rejected := make(chan *nats.Msg, 64)
	sub, err := b.nc.ChanSubscribe(wire.RejectedSubject, rejected)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type sent struct {
		seq     uint64
		replies chan *nats.Msg
	}
	out := make([]sent, len(cases))
	for i, tc := range cases {
		inbox := b.nc.NewRespInbox()
		replies := make(chan *nats.Msg, 8)
		rs, err := b.nc.ChanSubscribe(inbox, replies)
		require.NoError(t, err)
		defer func() { _ = rs.Unsubscribe() }()
		require.NoError(t, b.nc.Flush())
		m := nats.NewMsg(wire.CommandSubject(tc.subject))
		m.Data = tc.body
		if tc.msgID != "" {
			m.Header.Set(wire.HeaderMsgID, tc.msgID)
		}
		m.Header.Set(wire.HeaderReplyTo, inbox)
		ack, err := b.js.PublishMsg(ctx, m)
		require.NoError(t, err, tc.name)
		out[i] = sent{seq: ack.Sequence, replies: replies}
	}

	decode := func(t *testing.T, m *nats.Msg) operation.Result {
		t.Helper()
		var r operation.Result
		require.NoError(t, json.Unmarshal(m.Data, &r))
		require.NotContains(t, string(m.Data), secret)
		require.NotContains(t, string(m.Data), card)
		return r
	}
	onSubject := map[uint64]operation.Result{}
	for len(onSubject) < len(cases) {
		select {
		case m := <-rejected:
			r := decode(t, m)
			onSubject[r.CommandSeq] = r
		case <-ctx.Done():
			t.Fatalf("%d of %d rejected results on %s: %v", len(onSubject), len(cases), wire.RejectedSubject, onSubject)
		}
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var reply operation.Result
			select {
			case m := <-out[i].replies:
				reply = decode(t, m)
			case <-ctx.Done():
				t.Fatal("no result on the reply subject")
			}
			for _, r := range []operation.Result{reply, onSubject[out[i].seq]} {
				require.Equal(t, operation.ResultRejected, r.Status)
				require.Equal(t, string(tc.code), r.ErrorCode)
				require.Equal(t, out[i].seq, r.CommandSeq)
				require.Equal(t, tc.eventID, r.EventID)
				require.Empty(t, r.OperationKey)
				require.NotEmpty(t, r.Reason)
				if tc.field != "" {
					require.Contains(t, r.Reason, tc.field, "the reason names the field")
				}
			}
		})
	}

	// Every command was terminated after its one delivery, and the results
	// stream holds exactly one rejected result per command, identified by
	// the command's stream sequence.
	require.Eventually(t, func() bool {
		c, err := b.js.Consumer(ctx, b.ncfg.CommandsStream, b.ncfg.Durable)
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0 && ci.NumRedelivered == 0
	}, 30*time.Second, 20*time.Millisecond)
	stream, err := b.js.Stream(ctx, b.ncfg.ResultsStream)
	require.NoError(t, err)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(wire.RejectedSubject))
	require.NoError(t, err)
	require.Equal(t, uint64(len(cases)), info.State.Subjects[wire.RejectedSubject])
	ids := map[string]bool{}
	oc, err := b.js.OrderedConsumer(ctx, b.ncfg.ResultsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{wire.RejectedSubject}})
	require.NoError(t, err)
	batch, err := oc.Fetch(len(cases), jetstream.FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		ids[m.Headers().Get(wire.HeaderMsgID)] = true
	}
	for _, s := range out {
		require.True(t, ids["_rejected:"+strconv.FormatUint(s.seq, 10)], "Nats-Msg-Id from the stream sequence %d: %v", s.seq, ids)
	}

	for i, s := range out {
		require.Empty(t, s.replies, "%s: one result on the reply subject", cases[i].name)
	}

	// Nothing offending was logged; each rejection was, with its code.
	log := logs.String()
	require.NotContains(t, log, secret)
	require.NotContains(t, log, card)
	require.Equal(t, len(cases), strings.Count(log, `"msg":"command rejected"`), log)
	for _, tc := range cases {
		require.Contains(t, log, `"reason":"`+string(tc.code)+`"`)
	}
	// The daemon keeps serving.
	b.publish(t, []byte(`{"event_id":"evt-after","operation":"payment.charge","approval_id":"appr-1",
		"payload":{"account_id":"merchant-account-17","order_id":"order-2","amount_minor":100,"currency":"RUB"}}`))
	require.Equal(t, operation.ResultSucceeded, b.await(t, "test:payment.charge:evt-after:v1", 1)[0].Status)
}
