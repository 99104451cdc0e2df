package stripe_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/stripe"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sbst "github.com/idemgate/idemgate/sandbox/stripe"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type bundle struct {
	srv *sbst.Server
	a   *stripe.Adapter
	clk *clock
}

func setup(t *testing.T, opts sbst.Options, mod func(*stripe.Config)) bundle {
	t.Helper()
	clk := &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	opts.Clock = clk.Now
	if opts.SearchLag == 0 {
		opts.SearchLag = 30 * time.Second
	}
	srv := sbst.New(opts)
	base, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	cfg := stripe.Config{BaseURL: base, SecretKey: adapters.SecretKey{Value: redact.Secret(srv.SecretKey())}, HTTPConfig: adapters.HTTPConfig{Timeout: time.Second, Clock: clk.Now}}
	if mod != nil {
		mod(&cfg)
	}
	a, err := stripe.New(cfg)
	require.NoError(t, err)
	return bundle{srv: srv, a: a, clk: clk}
}

func fingerprint(typ string, f map[string]any) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(typ, f)))
	return hex.EncodeToString(sum[:])
}

func charge(intent, pm string, amount int64) operation.Operation {
	f := map[string]any{"account_id": pm, "order_id": "order-" + intent, "amount_minor": amount, "currency": "EUR"}
	return operation.Operation{
		Key:     adaptertest.Key(stripe.OpCharge, intent),
		EventID: "evt-" + intent, Type: stripe.OpCharge, TargetSystem: "payments",
		ApprovalID: "appr-" + intent, Fields: f, Fingerprint: fingerprint(stripe.OpCharge, f),
	}
}

func refund(intent, pi string, amount int64) operation.Operation {
	f := map[string]any{"payment_id": pi, "amount_minor": amount, "currency": "EUR"}
	return operation.Operation{
		Key:     adaptertest.Key(stripe.OpRefund, intent),
		EventID: "evt-" + intent, Type: stripe.OpRefund, TargetSystem: "payments",
		ApprovalID: "appr-" + intent, Fields: f, Fingerprint: fingerprint(stripe.OpRefund, f),
	}
}

func TestContract(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			b := setup(t, sbst.Options{}, nil)
			return adaptertest.Setup{Adapter: b.a, Sandbox: b.srv, Advance: b.clk.Advance}
		},
		Op: func(intent string, variant int) operation.Operation {
			return charge(intent, "pm_card_visa", 2000+int64(variant)*100)
		},
		Invalid: func(intent string) operation.Operation {
			op := charge(intent, "pm_card_visa", 2000)
			op.Fields["currency"] = "XTS"
			return op
		},
		Secret:            sbst.DefaultSecretKey,
		ReplayDedup:       true,
		DetectsMismatch:   true,
		IgnoreKeyEffects:  2, // residual window: a dropped header cannot be seen
		ReportsDuplicates: true,
		ConcurrentDedup:   true,
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// net/http re-sends a request carrying Idempotency-Key on a reused
// connection that closed before any answer. Behind a connector that drops
// the key that is a second charge. The adapter's requests cannot be
// rewound, so the failure comes back to the worker: one effect. The control
// shows the hazard with an ordinary rewindable request: two effects.
func TestTransportDoesNotResend(t *testing.T) {
	t.Parallel()
	t.Run("adapter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, sbst.Options{IgnoreKeys: true}, nil)
		_, err := b.a.Execute(ctx(t), charge(adaptertest.Intent("warm"), "pm_card_visa", 100)) // pools a connection
		require.NoError(t, err)
		require.NoError(t, b.srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
		op := charge(adaptertest.Intent("resend"), "pm_card_visa", 100)
		_, err = b.a.Execute(ctx(t), op)
		adaptertest.RequireClass(t, err, adapters.ReconcileBeforeRetry, adapters.CodeConnectionLostWhileWaiting)
		require.Equal(t, 1, b.srv.Effects(op.Key.String()))
	})
	t.Run("control_rewindable_request", func(t *testing.T) {
		t.Parallel()
		b := setup(t, sbst.Options{IgnoreKeys: true}, nil)
		client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 5 * time.Second}
		post := func(key string) (*http.Response, error) {
			form := url.Values{"amount": {"100"}, "currency": {"eur"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}}
			req, err := http.NewRequest(http.MethodPost, b.srv.URL()+"/v1/payment_intents", bytes.NewReader([]byte(form.Encode())))
			require.NoError(t, err)
			require.NotNil(t, req.GetBody, "bytes.Reader bodies are rewindable")
			req.Header.Set("Authorization", "Bearer "+b.srv.SecretKey())
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Idempotency-Key", key)
			return client.Do(req)
		}
		resp, err := post("warm-key")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.NoError(t, b.srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
		resp, err = post("naive-key")
		require.NoError(t, err, "the transport re-sent the request by itself")
		resp.Body.Close()
		require.Equal(t, 2, b.srv.Effects("naive-key"), "the hazard: two charges for one call")
	})
}

func TestDeclinedIsFinal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ pm, code string }{
		{"pm_card_chargeDeclinedInsufficientFunds", adapters.CodeInsufficientFunds},
		{"pm_card_chargeDeclined", adapters.CodeDeclined},
		{"pm_card_authenticationRequired", adapters.CodeDeclined},
	} {
		t.Run(c.pm, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sbst.Options{}, nil)
			op := charge(adaptertest.Intent("decline"), c.pm, 5000)
			out, err := b.a.Execute(ctx(t), op)
			adaptertest.RequireClass(t, err, adapters.NeverRetry, c.code)
			require.NotEmpty(t, out.ObjectID, "the declined PaymentIntent is named")

			_, err = b.a.Execute(ctx(t), op) // replayed 402, no second attempt
			adaptertest.RequireClass(t, err, adapters.NeverRetry, c.code)
			require.Equal(t, 1, b.srv.Effects(op.Key.String()))

			b.clk.Advance(b.a.Capabilities().SettleTime)
			lr, err := b.a.Lookup(ctx(t), op)
			require.NoError(t, err)
			require.Equal(t, adapters.Found, lr.Status)
			require.True(t, lr.Final)
			require.Equal(t, c.code, lr.Code)
			require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
		})
	}
}

func TestSearchLag(t *testing.T) {
	t.Parallel()
	b := setup(t, sbst.Options{}, nil)
	op := charge(adaptertest.Intent("lag"), "pm_card_visa", 100)
	out, err := b.a.Execute(ctx(t), op)
	require.NoError(t, err)
	lr, err := b.a.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status, "inside the index lag")
	b.clk.Advance(b.a.Capabilities().SettleTime)
	lr, err = b.a.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
}

func TestKeyInUse(t *testing.T) {
	t.Parallel()
	hold, admitted := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := setup(t, sbst.Options{BeforeExecute: func(*http.Request) {
		once.Do(func() { close(admitted); <-hold })
	}}, func(c *stripe.Config) { c.Timeout = 10 * time.Second })
	op := charge(adaptertest.Intent("inflight"), "pm_card_visa", 100)
	first := make(chan error, 1)
	go func() { _, err := b.a.Execute(context.Background(), op); first <- err }()
	<-admitted
	_, err := b.a.Execute(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.Retry, stripe.CodeKeyInUse)
	close(hold)
	require.NoError(t, <-first)
	require.Equal(t, 1, b.srv.Effects(op.Key.String()))
}

func TestRefund(t *testing.T) {
	t.Parallel()
	b := setup(t, sbst.Options{}, nil)
	paid, err := b.a.Execute(ctx(t), charge(adaptertest.Intent("pay"), "pm_card_visa", 10000))
	require.NoError(t, err)
	op := refund(adaptertest.Intent("refund"), paid.ObjectID, 4000)
	lr, err := b.a.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status)

	require.NoError(t, b.srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Count: 1}))
	_, err = b.a.Execute(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.ReconcileBeforeRetry, adapters.CodeTimeoutAfterRequestSent)
	lr, err = b.a.Lookup(ctx(t), op) // the refund list is strongly consistent
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, paid.ObjectID, lr.Outcome.Details["payment_id"])

	out, err := b.a.Execute(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, lr.Outcome.ObjectID, out.ObjectID)
	require.Equal(t, true, out.Details[operation.DetailTargetReplayed])
	require.Equal(t, 1, b.srv.Effects(op.Key.String()))

	_, err = b.a.Execute(ctx(t), refund(adaptertest.Intent("refund"), paid.ObjectID, 7000))
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeValidation)
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		header http.Header
		body   string
		class  adapters.Class
		code   string
	}{
		{"cached_500", 500, nil, `{"error":{"type":"api_error","message":"x"}}`, adapters.ReconcileBeforeRetry, adapters.CodeHTTP500},
		{"503_should_retry_false", 503, http.Header{"Stripe-Should-Retry": {"false"}}, `{"error":{"type":"api_error"}}`, adapters.ReconcileBeforeRetry, adapters.CodeHTTP503},
		{"lock_timeout", 429, nil, `{"error":{"type":"invalid_request_error","code":"lock_timeout"}}`, adapters.Retry, adapters.CodeHTTP429},
		{"forbidden", 403, nil, `{"error":{"type":"invalid_request_error"}}`, adapters.NeverRetry, adapters.CodeAuthorizationDenied},
		{"idempotency_error", 400, nil, `{"error":{"type":"idempotency_error"}}`, adapters.NeverRetry, adapters.CodeKeyPayloadMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := newRaw(t, c.status, c.header, c.body)
			a, err := stripe.New(stripe.Config{BaseURL: srv, SecretKey: adapters.SecretKey{Value: "sk_test_x"}, HTTPConfig: adapters.HTTPConfig{Timeout: time.Second}})
			require.NoError(t, err)
			_, err = a.Execute(ctx(t), charge(adaptertest.Intent("ans"), "pm_card_visa", 100))
			adaptertest.RequireClass(t, err, c.class, c.code)
		})
	}
}

func newRaw(t *testing.T, status int, h http.Header, body string) string {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})}
	core := sandbox.NewCore(sandbox.Spec{Name: "raw", Handler: srv.Handler}, sandbox.Options{})
	base, err := core.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = core.Close() })
	return base
}

func TestConfig(t *testing.T) {
	t.Parallel()
	a, err := stripe.New(stripe.Config{HTTPConfig: adapters.HTTPConfig{Getenv: func(k string) string { return map[string]string{"STRIPE_SECRET_KEY": "sk_env"}[k] }}})
	require.NoError(t, err)
	require.Equal(t, time.Minute, a.Capabilities().SettleTime)
	_, err = stripe.New(stripe.Config{HTTPConfig: adapters.HTTPConfig{Getenv: func(string) string { return "" }}})
	require.ErrorIs(t, err, stripe.ErrInvalidConfig)
	require.ErrorIs(t, stripe.Config{SettleTime: -1}.WithDefaults().Validate(), stripe.ErrInvalidConfig)
	cfg := stripe.Config{SecretKey: adapters.SecretKey{Value: "sk_live_secretvalue"}}
	require.NotContains(t, fmt.Sprintf("%v %+v", cfg, cfg), "sk_live_secretvalue")
}
