package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// yookassaAddr is an address in YooKassa's published range.
const yookassaAddr = "185.71.76.5:443"

func TestStripeWebhooks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := stripeEvent("evt_1NG8Du2eZvKYlo2C", "payment_intent.succeeded", "cust-42")
	tests := []struct {
		name   string
		hdr    http.Header
		body   []byte
		status int
	}{
		{"signed with the new secret", stripeHeader(stripeNew, fixedNow, body), body, 200},
		{"signed with the old secret (rotation)", stripeHeader(stripeOld, fixedNow.Add(-time.Minute), body), body, 200},
		{"tampered body", stripeHeader(stripeNew, fixedNow, body), bytes.Replace(body, []byte("cust-42"), []byte("cust-43"), 1), 401},
		{"unknown secret", stripeHeader("whsec_attacker", fixedNow, body), body, 401},
		{"expired timestamp", stripeHeader(stripeNew, fixedNow.Add(-6*time.Minute), body), body, 401},
		{"future timestamp", stripeHeader(stripeNew, fixedNow.Add(6*time.Minute), body), body, 401},
		{"no signature", nil, body, 401},
	}
	for _, tt := range tests { // sequential: they share the stream
		rec := b.post(t, "stripe", tt.body, tt.hdr, "")
		require.Equal(t, tt.status, rec.Code, "%s: %s", tt.name, rec.Body)
	}
	// Both accepted deliveries are the same event: one command.
	require.Equal(t, uint64(1), b.msgs(t))
	st := b.srv.Stats("stripe")
	require.Equal(t, uint64(1), st.Accepted)
	require.Equal(t, uint64(1), st.Duplicate)
	require.Equal(t, uint64(5), st.Rejected[ingest.ReasonSignature]+st.Rejected[ingest.ReasonTimestamp])
	require.Equal(t, uint64(2), st.Rejected[ingest.ReasonTimestamp])

	m := b.last(t, "idemgate.cmd.crm.task.create")
	require.Equal(t, "stripe:evt_1NG8Du2eZvKYlo2C", m.Header.Get(jetstream.MsgIDHeader))
	require.Equal(t, "stripe", m.Header.Get(wire.HeaderSource))
	var cmd operation.Command
	require.NoError(t, json.Unmarshal(m.Data, &cmd))
	require.Equal(t, "stripe:evt_1NG8Du2eZvKYlo2C", cmd.EventID)
	require.Equal(t, "crm.task.create", cmd.Operation)
	require.JSONEq(t, `{"title":"Позвонить клиенту","responsible_id":"manager-7","customer_id":"cust-42"}`, string(cmd.Payload))

	// The daemon's decoder accepts it, with the key derived from the event id.
	dec := operation.Decoder{Env: "prod"}
	op, err := dec.Decode(m.Data)
	require.NoError(t, err)
	require.Equal(t, "prod:crm.task.create:stripe:evt_1NG8Du2eZvKYlo2C:v1", op.Key.String())
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := invoicePaid("order-48291")
	tests := []struct {
		name   string
		hdr    http.Header
		body   []byte
		status int
	}{
		{"new secret", standardHeaders(standardNew, "msg_2KWPBgLlAfxdpx2AI54pPJ85f1W", fixedNow, body), body, 200},
		{"old secret (rotation), redelivery", standardHeaders(standardOld, "msg_2KWPBgLlAfxdpx2AI54pPJ85f1W", fixedNow.Add(time.Minute), body), body, 200},
		{"tampered body", standardHeaders(standardNew, "msg_2", fixedNow, body), invoicePaid("order-1"), 401},
		{"expired", standardHeaders(standardNew, "msg_3", fixedNow.Add(-10*time.Minute), body), body, 401},
		{"future", standardHeaders(standardNew, "msg_4", fixedNow.Add(10*time.Minute), body), body, 401},
		{"unknown secret", standardHeaders("whsec_YXR0YWNrZXI=", "msg_5", fixedNow, body), body, 401},
	}
	for _, tt := range tests {
		rec := b.post(t, "billing", tt.body, tt.hdr, "")
		require.Equal(t, tt.status, rec.Code, "%s: %s", tt.name, rec.Body)
	}
	require.Equal(t, uint64(1), b.msgs(t))
	m := b.last(t, "idemgate.cmd.invoice.create")
	var cmd operation.Command
	require.NoError(t, json.Unmarshal(m.Data, &cmd))
	require.Equal(t, "billing:msg_2KWPBgLlAfxdpx2AI54pPJ85f1W", cmd.EventID)
	// Amount converted to minor units, the numeric customer id to a string.
	require.JSONEq(t, `{"order_id":"order-48291","customer_id":"4711","amount_minor":125050,"currency":"rub"}`, string(cmd.Payload))
	op, err := (&operation.Decoder{Env: "prod"}).Decode(m.Data)
	require.NoError(t, err)
	require.Equal(t, int64(125050), op.Int("amount_minor"))
	require.Equal(t, "RUB", op.String("currency"))
}

func TestTBankWebhooks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	good := tbankNotification(tbankPwdNew, nil)
	tampered := bytes.Replace(good, []byte(`"Amount":19200`), []byte(`"Amount":1`), 1)
	require.NotEqual(t, good, tampered)
	tests := []struct {
		name   string
		body   []byte
		status int
	}{
		{"new password", good, 200},
		{"old password (rotation), redelivery", tbankNotification(tbankPwdOld, nil), 200},
		{"tampered amount", tampered, 401},
		{"other terminal", tbankNotification(tbankPwdNew, map[string]any{"TerminalKey": "Other"}), 401},
		{"wrong password", tbankNotification("guess", nil), 401},
		{"unrouted status", tbankNotification(tbankPwdNew, map[string]any{"Status": "AUTHORIZED"}), 200},
	}
	for _, tt := range tests {
		rec := b.post(t, "tbank", tt.body, nil, "")
		require.Equal(t, tt.status, rec.Code, "%s: %s", tt.name, rec.Body)
		if tt.status == 200 {
			require.Equal(t, "OK", rec.Body.String(), "T-Bank expects the body OK")
		}
	}
	require.Equal(t, uint64(1), b.msgs(t))
	m := b.last(t, "idemgate.cmd.crm.task.create")
	require.Equal(t, "tbank:123456789:CONFIRMED:19200", m.Header.Get(jetstream.MsgIDHeader))
	st := b.srv.Stats("tbank")
	require.Equal(t, Stats(1, 1, 1), Stats(st.Accepted, st.Duplicate, st.Unrouted))
}

// Stats packs three counts for one comparison.
func Stats(accepted, duplicate, unrouted uint64) [3]uint64 {
	return [3]uint64{accepted, duplicate, unrouted}
}

func TestSameWebhookThreeTimesIsOneCommand(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := stripeEvent("evt_3Times", "payment_intent.succeeded", "cust-1")
	for i := range 3 {
		// Each delivery attempt carries a new timestamp and signature.
		rec := b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow.Add(time.Duration(i)*time.Second), body), "")
		require.Equal(t, 200, rec.Code, rec.Body.String())
	}
	require.Equal(t, uint64(1), b.msgs(t))
	st := b.srv.Stats("")
	require.Equal(t, uint64(1), st.Accepted)
	require.Equal(t, uint64(2), st.Duplicate)
}

func TestJetStreamDownThenRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{pubTimer: 500 * time.Millisecond})
	body := stripeEvent("evt_outage", "payment_intent.succeeded", "cust-1")
	// JetStream goes away: the sender is told to retry.
	addr := b.ns.Addr().String()
	b.ns.Shutdown()
	b.ns.WaitForShutdown()
	rec := b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow, body), "")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.Equal(t, uint64(1), b.srv.Stats("stripe").Rejected[ingest.ReasonPublishUnavailable])

	// The server comes back on the same port with the same store.
	var p int
	_, err := fmt.Sscanf(addr[strings.LastIndex(addr, ":")+1:], "%d", &p)
	require.NoError(t, err)
	b.ns = natsServer(t, b.dir, p)
	select {
	case <-b.reconn:
	case <-time.After(10 * time.Second):
		t.Fatal("client did not reconnect")
	}
	waitStream(t, b)

	// The sender's retry is accepted, and the command is in the stream once.
	rec = b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow.Add(30*time.Second), body), "")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	require.Equal(t, uint64(1), b.msgs(t))
	m := b.last(t, "idemgate.cmd.crm.task.create")
	require.Equal(t, "stripe:evt_outage", m.Header.Get(jetstream.MsgIDHeader))
}

// waitStream waits until the restarted server answers for the stream.
func waitStream(t *testing.T, b *bundle) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := b.stream.Info(ctx)
		cancel()
		if err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "stream not back: %v", err)
	}
}

func TestBadRequestsPublishNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: func(c *ingest.Config) { c.MaxBodyBytes = 1024 }})
	big := stripeEvent("evt_big", "payment_intent.succeeded", strings.Repeat("x", 2000))
	malformed := []byte(`{"id":"evt_bad","type":`)
	notObject := []byte(`["evt"]`)
	noType := []byte(`{"id":"evt_notype"}`)
	noID := []byte(`{"type":"payment_intent.succeeded"}`)
	tests := []struct {
		name        string
		body        []byte
		contentType string
		hdr         http.Header
		status      int
		reason      ingest.Reason
	}{
		{"oversized", big, "application/json", stripeHeader(stripeNew, fixedNow, big), 413, ingest.ReasonTooLarge},
		{"malformed JSON, signed", malformed, "application/json", stripeHeader(stripeNew, fixedNow, malformed), 400, ingest.ReasonMalformed},
		{"not an object", notObject, "application/json", stripeHeader(stripeNew, fixedNow, notObject), 400, ingest.ReasonMalformed},
		{"no event type", noType, "application/json", stripeHeader(stripeNew, fixedNow, noType), 400, ingest.ReasonMalformed},
		{"no event id", noID, "application/json", stripeHeader(stripeNew, fixedNow, noID), 400, ingest.ReasonMalformed},
		{"form body", []byte("a=b"), "application/x-www-form-urlencoded", nil, 415, ingest.ReasonContentType},
		{"no content type", []byte("{}"), "", nil, 415, ingest.ReasonContentType},
		{"json with charset", stripeEvent("evt_charset", "payment_intent.succeeded", "c"), "application/json; charset=utf-8", nil, 401, ingest.ReasonSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest("stripe", tt.body, tt.hdr)
			if tt.contentType == "" {
				req.Header.Del("Content-Type")
			} else {
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := serve(b, req)
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
			require.NotZero(t, b.srv.Stats("stripe").Rejected[tt.reason])
		})
	}
	// A chunked body without Content-Length is cut by MaxBytesReader.
	req := newRequest("stripe", big, stripeHeader(stripeNew, fixedNow, big))
	req.ContentLength = -1
	require.Equal(t, 413, serve(b, req).Code)

	// Unknown source, wrong method.
	require.Equal(t, 404, b.post(t, "paypal", []byte("{}"), nil, "").Code)
	get := newRequest("stripe", nil, nil)
	get.Method = http.MethodGet
	require.Equal(t, http.StatusMethodNotAllowed, serve(b, get).Code)

	require.Equal(t, uint64(0), b.msgs(t))
}

func TestMappingFailureIs422(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// No customer id where the route expects one.
	body := []byte(`{"id":"evt_nocust","type":"payment_intent.succeeded","data":{"object":{"metadata":{}}}}`)
	rec := b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow, body), "")
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	// An amount the operation refuses (more decimals than minor units).
	inv := []byte(`{"type":"invoice.paid","data":{"order_id":"o-1","customer_id":"c","amount":"1.005","currency":"RUB"}}`)
	rec = b.post(t, "billing", inv, standardHeaders(standardNew, "msg_amount", fixedNow, inv), "")
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	// A currency the daemon's decoder refuses.
	inv = []byte(`{"type":"invoice.paid","data":{"order_id":"o-1","customer_id":"c","amount":"1.00","currency":"rubles"}}`)
	rec = b.post(t, "billing", inv, standardHeaders(standardNew, "msg_currency", fixedNow, inv), "")
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	require.Equal(t, uint64(0), b.msgs(t))
	require.Equal(t, uint64(3), b.srv.Stats("").Rejected[ingest.ReasonMapping])
}

func TestUnroutedIsAcknowledgedNotPublished(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{logLevel: slog.LevelInfo})
	for i, ev := range []string{"evt_unrouted", "evt_unrouted_2"} {
		body := stripeEvent(ev, "customer.created", "cust-1")
		rec := b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow, body), "")
		require.Equal(t, 200, rec.Code)
		require.Equal(t, uint64(0), b.msgs(t))
		st := b.srv.Stats("stripe")
		require.Equal(t, uint64(i+1), st.Unrouted)
		require.Zero(t, st.Accepted)
	}
	// At the default level each unrouted event type is said once.
	logs := b.logs.String()
	require.Equal(t, 1, strings.Count(logs, "webhook event type has no route"), logs)
	require.Contains(t, logs, `"event_type":"customer.created"`)
}

func TestYooKassaAllowListAndRefetch(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const payID = "22d6d597-000f-5000-9000-145f6df21d6f"
	b.yk.put(payID, yookassaPayment(payID, "succeeded", "100.50"))
	note := yookassaNotification("payment.succeeded", yookassaPayment(payID, "succeeded", "100.50"))

	// From an address outside YooKassa's ranges: 403, whatever it claims.
	rec := b.post(t, "yookassa", note, nil, "203.0.113.9:5000")
	require.Equal(t, http.StatusForbidden, rec.Code)
	// X-Forwarded-For from an untrusted peer is ignored.
	rec = b.post(t, "yookassa", note, http.Header{"X-Forwarded-For": {"185.71.76.5"}}, "203.0.113.9:5000")
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Equal(t, uint64(2), b.srv.Stats("yookassa").Rejected[ingest.ReasonAddress])

	// Through our trusted proxy, from YooKassa's range: re-fetched and published.
	viaProxy := http.Header{"X-Forwarded-For": {"185.71.76.5"}}
	rec = b.post(t, "yookassa", note, viaProxy, "10.0.0.1:40000")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	// Directly from YooKassa's range, a redelivery: acknowledged, no second command.
	rec = b.post(t, "yookassa", note, nil, yookassaAddr)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	require.Equal(t, uint64(1), b.msgs(t))
	m := b.last(t, "idemgate.cmd.invoice.create")
	require.Equal(t, "yookassa:payment.succeeded:"+payID, m.Header.Get(jetstream.MsgIDHeader))
	var cmd operation.Command
	require.NoError(t, json.Unmarshal(m.Data, &cmd))
	require.JSONEq(t, `{"order_id":"order-72","customer_id":"cust-5","amount_minor":10050,"currency":"RUB"}`, string(cmd.Payload))

	// The notification's object is not what is published: the re-fetched one is.
	const pay2 = "2d6d597a-000f-5000-9000-145f6df21d6f"
	b.yk.put(pay2, strings.Replace(yookassaPayment(pay2, "succeeded", "7.00"), "cust-5", "cust-from-api", 1))
	note2 := yookassaNotification("payment.succeeded", yookassaPayment(pay2, "succeeded", "7.00"))
	rec = b.post(t, "yookassa", note2, nil, yookassaAddr)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	require.NoError(t, json.Unmarshal(b.last(t, "idemgate.cmd.invoice.create").Data, &cmd))
	require.Contains(t, string(cmd.Payload), `"cust-from-api"`)
	require.Equal(t, uint64(2), b.msgs(t))

	// The provider says the payment is still pending: not trusted, retry later.
	const pay3 = "3d6d597a-000f-5000-9000-145f6df21d6f"
	b.yk.put(pay3, yookassaPayment(pay3, "pending", "5.00"))
	rec = b.post(t, "yookassa", yookassaNotification("payment.succeeded", yookassaPayment(pay3, "succeeded", "5.00")), nil, yookassaAddr)
	require.Equal(t, http.StatusConflict, rec.Code)
	// Same status, other amount: not trusted either.
	b.yk.put(pay3, yookassaPayment(pay3, "succeeded", "5.00"))
	rec = b.post(t, "yookassa", yookassaNotification("payment.succeeded", yookassaPayment(pay3, "succeeded", "5000.00")), nil, yookassaAddr)
	require.Equal(t, http.StatusConflict, rec.Code)
	// A payment the provider does not know: forged.
	rec = b.post(t, "yookassa", yookassaNotification("payment.succeeded", yookassaPayment("4d6d597a-0000-0000-0000-000000000000", "succeeded", "1.00")), nil, yookassaAddr)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	// The provider is down: retry later.
	b.yk.mu.Lock()
	b.yk.fail = true
	b.yk.mu.Unlock()
	rec = b.post(t, "yookassa", yookassaNotification("payment.succeeded", yookassaPayment(pay3, "succeeded", "5.00")), nil, yookassaAddr)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)

	require.Equal(t, uint64(2), b.msgs(t))
	st := b.srv.Stats("yookassa")
	require.Equal(t, uint64(3), st.Rejected[ingest.ReasonNotTrusted])
	require.Equal(t, uint64(1), st.Rejected[ingest.ReasonRefetchUnavailable])

	// Unrouted events are acknowledged without asking the provider.
	b.yk.mu.Lock()
	gets := b.yk.gets
	b.yk.mu.Unlock()
	rec = b.post(t, "yookassa", yookassaNotification("payment.waiting_for_capture", yookassaPayment(pay3, "waiting_for_capture", "5.00")), nil, yookassaAddr)
	require.Equal(t, 200, rec.Code)
	b.yk.mu.Lock()
	require.Equal(t, gets, b.yk.gets)
	b.yk.mu.Unlock()
}

func TestLogsHoldNoSecretsOrBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := stripeEvent("evt_logs", "payment_intent.succeeded", "customer-secret-name")
	require.Equal(t, 200, b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow, body), "").Code)
	tampered := bytes.Replace(body, []byte("evt_logs"), []byte("evt_logz"), 1)
	require.Equal(t, 401, b.post(t, "stripe", tampered, stripeHeader(stripeNew, fixedNow, body), "").Code)
	logs := b.logs.String()
	require.Contains(t, logs, "webhook rejected")
	for _, secret := range []string{stripeOld, stripeNew, standardOld, standardNew, tbankPwdOld, tbankPwdNew, shopSecret, "customer-secret-name"} {
		require.NotContains(t, logs, secret)
	}
	// A printed configuration hides its secrets too.
	cfg := testConfig("http://127.0.0.1:1/v3")
	for _, dump := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
		for _, secret := range []string{stripeOld, stripeNew, standardOld, tbankPwdNew, shopSecret} {
			require.NotContains(t, dump, secret)
		}
	}
	j, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NotContains(t, string(j), stripeNew)
}

func TestMetricsCollector(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, setupOpts{opts: []ingest.Option{ingest.WithRegisterer(reg)}})
	body := stripeEvent("evt_metrics", "payment_intent.succeeded", "c")
	require.Equal(t, 200, b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow, body), "").Code)
	require.Equal(t, 401, b.post(t, "stripe", body, nil, "").Code)
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			got[f.GetName()+"{"+labels+"}"] = m.GetCounter().GetValue()
		}
	}
	require.Equal(t, 1.0, got["idemgate_webhook_accepted_total{source=stripe,}"])
	require.Equal(t, 1.0, got["idemgate_webhook_rejected_total{reason=signature,source=stripe,}"])
	require.Equal(t, 0.0, got["idemgate_webhook_duplicates_total{source=billing,}"])
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: func(c *ingest.Config) { c.Addr = "127.0.0.1:0" }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, b.srv.Start(ctx))
	require.ErrorIs(t, b.srv.Start(ctx), ingest.ErrStarted)
	body := stripeEvent("evt_http", "payment_intent.succeeded", "c")
	req, err := http.NewRequest(http.MethodPost, "http://"+b.srv.Addr()+"/webhooks/stripe", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = stripeHeader(stripeNew, fixedNow, body)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	client.CloseIdleConnections()
	b.srv.Stop()
	b.srv.Stop() // safe twice
	require.Equal(t, uint64(1), b.msgs(t))

	// Cancelling Start's context stops a server too.
	b2 := setup(t, setupOpts{cfg: func(c *ingest.Config) { c.Addr = "127.0.0.1:0" }})
	ctx2, cancel2 := context.WithCancel(context.Background())
	require.NoError(t, b2.srv.Start(ctx2))
	cancel2()
	b2.srv.Stop()
	_, err = http.Post("http://"+b2.srv.Addr()+"/webhooks/stripe", "application/json", strings.NewReader("{}"))
	require.Error(t, err)
}

func TestListenAndServe(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: func(c *ingest.Config) { c.Addr = "127.0.0.1:0" }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.srv.ListenAndServe(ctx) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not return")
	}
}

func TestIntentPathsMakeOneOperationOfTwoEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: func(c *ingest.Config) {
		r := &c.Sources[0].Routes[0]
		r.IntentPaths = []string{"type", "data.object.id"}
		r.KeyVersion = "v2"
	}})
	// Stripe may send two Event objects for one change: other ids, same object.
	for _, id := range []string{"evt_first", "evt_second"} {
		body := stripeEvent(id, "payment_intent.succeeded", "cust-1")
		require.Equal(t, 200, b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow, body), "").Code)
	}
	require.Equal(t, uint64(2), b.msgs(t), "two events, two messages")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dec := operation.Decoder{Env: "prod"}
	var keys []string
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := b.stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		op, err := dec.Decode(m.Data)
		require.NoError(t, err)
		keys = append(keys, op.Key.String())
	}
	// ... but one operation key, so the journal lets one of them act.
	require.Equal(t, "prod:crm.task.create:stripe:payment_intent.succeeded:pi_3MtwBw:v2", keys[0])
	require.Equal(t, keys[0], keys[1])
}

// TestMappedTextIsMaskedBeforeJetStream: a Stripe description mapped into a
// command's title and description holds a card number and a secret key; the
// command stored in the JetStream stream (read back from it) holds neither,
// while innocent text and ids are published as received.
func TestMappedTextIsMaskedBeforeJetStream(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: func(c *ingest.Config) {
		c.Sources[0].Routes = append(c.Sources[0].Routes, ingest.Route{
			Event: "charge.succeeded", Operation: "crm.task.create",
			Payload: []ingest.FieldMap{
				{Field: "title", Path: "data.object.description"},
				{Field: "description", Path: "data.object.statement"},
				{Field: "responsible_id", Value: "manager-7"},
				{Field: "customer_id", Path: "data.object.metadata.customer_id"},
			},
		})
	}})
	const (
		pan     = "4111 1111 1111 1111"
		bare    = "5555555555554444"
		sk      = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
		skTail  = "4eC39HqLyjWDarjtT1zdp7dc"
		innocnt = "order-token-77 for secret-santa-2026, reset 2026-12-02"
	)
	body := []byte(`{"id":"evt_mask","type":"charge.succeeded","data":{"object":{"id":"ch_1",` +
		`"description":"Paid with ` + pan + ` using ` + sk + `",` +
		`"statement":"card ` + bare + `; ` + innocnt + `",` +
		`"metadata":{"customer_id":"cus_NffrFeUfNV2Hib"}}}}`)
	rec := b.post(t, "stripe", body, stripeHeader(stripeNew, fixedNow, body), "")
	require.Equal(t, 200, rec.Code, rec.Body.String())

	m := b.last(t, "idemgate.cmd.crm.task.create")
	stored := string(m.Data)
	for _, leak := range []string{pan, bare, "4111111111111111", sk, skTail, "sk_live_"} {
		require.NotContains(t, stored, leak, "the stream holds %q", leak)
	}
	var cmd operation.Command
	require.NoError(t, json.Unmarshal(m.Data, &cmd))
	var payload map[string]string
	require.NoError(t, json.Unmarshal(cmd.Payload, &payload))
	require.Equal(t, "Paid with 4111 11** **** 1111 using [REDACTED]", payload["title"])
	require.Equal(t, "card 555555******4444; "+innocnt, payload["description"])
	require.Equal(t, "cus_NffrFeUfNV2Hib", payload["customer_id"])
	require.Equal(t, "manager-7", payload["responsible_id"])
	// The masked command is still one the daemon accepts.
	_, err := (&operation.Decoder{Env: "prod"}).Decode(m.Data)
	require.NoError(t, err)
}
