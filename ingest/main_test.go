package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/redact"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Test secrets. The Standard Webhooks one is the specification's test vector.
const (
	stripeOld   = "whsec_stripe_old_0123456789"
	stripeNew   = "whsec_stripe_new_9876543210"
	standardOld = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	standardNew = "whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24="
	tbankPwdOld = "tbank-password-old"
	tbankPwdNew = "tbank-password-new"
	tbankTerm   = "TestTerminal"
	shopID      = "shop-1"
	shopSecret  = "test_yookassa_secret_key"
)

// fixedNow is the test clock: signatures are made relative to it.
var fixedNow = time.Unix(1_760_000_000, 0)

// natsServer runs an embedded JetStream server in dir, on port (-1: any).
func natsServer(t testing.TB, dir string, port int) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	})
	require.NoError(t, err)
	go ns.Start()
	require.True(t, ns.ReadyForConnections(5*time.Second), "nats server not ready")
	return ns
}

// bundle is what a test works with.
type bundle struct {
	ns      *server.Server
	dir     string
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  jetstream.Stream
	srv     *ingest.Server
	logs    *syncBuffer
	yk      *fakeYooKassa
	reconn  chan struct{}
	handler http.Handler
}

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

type setupOpts struct {
	cfg      func(*ingest.Config)
	opts     []ingest.Option
	pubTimer time.Duration
	logLevel slog.Level // default debug
}

// setup starts NATS with the IDEMGATE_COMMANDS stream (2-minute dedup
// window), a fake YooKassa, and an ingest server over testConfig.
func setup(t testing.TB, so setupOpts) *bundle {
	t.Helper()
	b := &bundle{dir: t.TempDir(), logs: &syncBuffer{}, reconn: make(chan struct{}, 16)}
	b.ns = natsServer(t, b.dir, -1)
	t.Cleanup(func() {
		b.ns.Shutdown()
		b.ns.WaitForShutdown()
	})
	var err error
	b.nc, err = nats.Connect(b.ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) {
			select {
			case b.reconn <- struct{}{}:
			default:
			}
		}))
	require.NoError(t, err)
	t.Cleanup(b.nc.Close)
	b.js, err = jetstream.New(b.nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.stream, err = b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "IDEMGATE_COMMANDS", Subjects: []string{"idemgate.cmd.>"}, Duplicates: 2 * time.Minute,
		Storage: jetstream.FileStorage,
	})
	require.NoError(t, err)

	b.yk = newFakeYooKassa(t)
	cfg := testConfig(b.yk.URL())
	if so.pubTimer > 0 {
		cfg.PublishTimeout = so.pubTimer
	}
	if so.cfg != nil {
		so.cfg(&cfg)
	}
	level := slog.LevelDebug
	if so.logLevel != 0 {
		level = so.logLevel
	}
	log := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: level}))
	opts := append([]ingest.Option{ingest.WithClock(func() time.Time { return fixedNow })}, so.opts...)
	b.srv, err = ingest.New(cfg, b.js, log, opts...)
	require.NoError(t, err)
	b.handler = b.srv.Handler()
	return b
}

// testConfig routes one event of each source.
func testConfig(yookassaAPI string) ingest.Config {
	return ingest.Config{
		TrustedProxies: []string{"10.0.0.1"},
		Sources: []ingest.Source{
			{
				Name: "stripe", Secrets: []redact.Secret{stripeOld, stripeNew},
				Routes: []ingest.Route{{
					Event: "payment_intent.succeeded", Operation: "crm.task.create",
					Payload: []ingest.FieldMap{
						{Field: "title", Value: "Позвонить клиенту"},
						{Field: "responsible_id", Value: "manager-7"},
						{Field: "customer_id", Path: "data.object.metadata.customer_id"},
					},
				}},
			},
			{
				Name: "billing", Scheme: ingest.SchemeStandard, Secrets: []redact.Secret{standardOld, standardNew},
				Routes: []ingest.Route{{
					Event: "invoice.paid", Operation: "invoice.create",
					Payload: []ingest.FieldMap{
						{Field: "order_id", Path: "data.order_id"},
						{Field: "customer_id", Path: "data.customer_id", Convert: ingest.ConvertString},
						{Field: "amount_minor", Path: "data.amount", Convert: ingest.ConvertMinorUnits},
						{Field: "currency", Path: "data.currency"},
					},
				}},
			},
			{
				Name: "tbank", TerminalKey: tbankTerm, Secrets: []redact.Secret{tbankPwdOld, tbankPwdNew},
				Routes: []ingest.Route{{
					Event: "CONFIRMED", Operation: "crm.task.create",
					Payload: []ingest.FieldMap{
						{Field: "title", Value: "Payment confirmed"},
						{Field: "responsible_id", Value: "manager-7"},
						{Field: "description", Path: "OrderId"},
					},
				}},
			},
			{
				Name: "yookassa",
				// Default allow-list (YooKassa's addresses); 10.0.0.1 is our proxy.
				Refetch: ingest.YooKassaConfig{API: yookassaAPI, ShopID: shopID, SecretKey: shopSecret},
				Routes: []ingest.Route{{
					Event: "payment.succeeded", Operation: "invoice.create",
					Payload: []ingest.FieldMap{
						{Field: "order_id", Path: "object.metadata.order_id"},
						{Field: "customer_id", Path: "object.metadata.customer_id"},
						{Field: "amount_minor", Path: "object.amount.value", Convert: ingest.ConvertMinorUnits},
						{Field: "currency", Path: "object.amount.currency"},
					},
				}},
			},
		},
	}
}

// post sends a webhook through the handler, from addr (RemoteAddr).
func (b *bundle) post(t testing.TB, source string, body []byte, hdr http.Header, addr string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+source, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if addr != "" {
		req.RemoteAddr = addr
	}
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	return rec
}

func newRequest(source string, body []byte, hdr http.Header) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+source, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	return req
}

func serve(b *bundle, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	return rec
}

// msgs returns the number of messages in the command stream.
func (b *bundle) msgs(t testing.TB) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := b.stream.Info(ctx)
	require.NoError(t, err)
	return info.State.Msgs
}

// last returns the last message on subject.
func (b *bundle) last(t testing.TB, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := b.stream.GetLastMsgForSubject(ctx, subject)
	require.NoError(t, err)
	return m
}

// Signing helpers, written independently of the package's own.

func stripeHeader(secret string, ts time.Time, body []byte) http.Header {
	return http.Header{"Stripe-Signature": {fmt.Sprintf("t=%d,v1=%s", ts.Unix(), hexHMAC([]byte(secret), fmt.Sprintf("%d.%s", ts.Unix(), body)))}}
}

func stripeEvent(id, typ, customer string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"data":{"object":{"id":"pi_3MtwBw","object":"payment_intent","amount":2000,"metadata":{"customer_id":%q}}}}`, id, typ, customer))
}

func standardHeaders(secret, id string, ts time.Time, body []byte) http.Header {
	return http.Header{
		"Webhook-Id":        {id},
		"Webhook-Timestamp": {strconv.FormatInt(ts.Unix(), 10)},
		"Webhook-Signature": {"v1," + b64HMAC(mustStandardKey(secret), fmt.Sprintf("%s.%d.%s", id, ts.Unix(), body))},
	}
}

func invoicePaid(order string) []byte {
	return []byte(fmt.Sprintf(`{"type":"invoice.paid","timestamp":"2026-12-02T08:00:00Z","data":{"order_id":%q,"customer_id":4711,"amount":"1250.50","currency":"rub"}}`, order))
}

// tbankNotification returns a signed T-Bank notification.
func tbankNotification(password string, fields map[string]any) []byte {
	n := map[string]any{
		"TerminalKey": tbankTerm, "OrderId": "order-48291", "Success": true, "Status": "CONFIRMED",
		"PaymentId": json.Number("123456789"), "ErrorCode": "0", "Amount": json.Number("19200"),
		"CardId": json.Number("322264"), "Pan": "430000******0777", "ExpDate": "1130",
		"Data": map[string]any{"customer_id": "cust-9"},
	}
	for k, v := range fields {
		n[k] = v
	}
	n["Token"] = tokenByHand(n, password)
	b, _ := json.Marshal(n)
	return b
}

// fakeYooKassa answers GET /v3/payments/{id} with basic auth, as YooKassa.
type fakeYooKassa struct {
	srv      *httptest.Server
	mu       sync.Mutex
	payments map[string]string // id -> JSON object
	fail     bool
	gets     int
}

func newFakeYooKassa(t testing.TB) *fakeYooKassa {
	f := &fakeYooKassa{payments: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v3/payments/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.gets++
		if u, p, ok := r.BasicAuth(); !ok || u != shopID || p != shopSecret {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"type":"error","code":"invalid_credentials"}`))
			return
		}
		if f.fail {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"type":"error","code":"internal_server_error"}`))
			return
		}
		obj, ok := f.payments[r.PathValue("id")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"error","code":"not_found"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(obj))
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeYooKassa) URL() string { return f.srv.URL + "/v3" }

func (f *fakeYooKassa) put(id, obj string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payments[id] = obj
}

func yookassaPayment(id, status, value string) string {
	return fmt.Sprintf(`{"id":%q,"status":%q,"paid":true,"amount":{"value":%q,"currency":"RUB"},"metadata":{"order_id":"order-72","customer_id":"cust-5"}}`, id, status, value)
}

func yookassaNotification(event, object string) []byte {
	return []byte(fmt.Sprintf(`{"type":"notification","event":%q,"object":%s}`, event, object))
}
