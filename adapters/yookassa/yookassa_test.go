package yookassa_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sbyk "github.com/idemgate/idemgate/sandbox/yookassa"
)

type bundle struct {
	srv *sbyk.Server
	a   *yookassa.Adapter
}

func setup(t *testing.T, opts sbyk.Options, mod func(*yookassa.Config)) bundle {
	t.Helper()
	srv := sbyk.New(opts)
	base, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	shop, secret := srv.Credentials()
	cfg := yookassa.Config{BaseURL: base, ShopID: shop, SecretKey: redact.Secret(secret), Timeout: time.Second}
	if mod != nil {
		mod(&cfg)
	}
	a, err := yookassa.New(cfg)
	require.NoError(t, err)
	return bundle{srv: srv, a: a}
}

func mustNew(t *testing.T, b bundle, mod func(*yookassa.Config)) *yookassa.Adapter {
	t.Helper()
	shop, secret := b.srv.Credentials()
	cfg := yookassa.Config{BaseURL: b.srv.URL(), ShopID: shop, SecretKey: redact.Secret(secret), Timeout: time.Second}
	mod(&cfg)
	a, err := yookassa.New(cfg)
	require.NoError(t, err)
	return a
}

func fingerprint(typ string, f map[string]any) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(typ, f)))
	return hex.EncodeToString(sum[:])
}

func charge(intent string, method string, amount int64, currency string) operation.Operation {
	f := map[string]any{"account_id": method, "order_id": "order-" + intent, "amount_minor": amount, "currency": currency}
	return operation.Operation{
		Key:     adaptertest.Key(yookassa.OpCharge, intent),
		EventID: "evt-" + intent, Type: yookassa.OpCharge, TargetSystem: "payments",
		ApprovalID: "appr-" + intent, Fields: f, Fingerprint: fingerprint(yookassa.OpCharge, f),
	}
}

func refund(intent, paymentID string, amount int64) operation.Operation {
	f := map[string]any{"payment_id": paymentID, "amount_minor": amount, "currency": "RUB"}
	return operation.Operation{
		Key:     adaptertest.Key(yookassa.OpRefund, intent),
		EventID: "evt-" + intent, Type: yookassa.OpRefund, TargetSystem: "payments",
		ApprovalID: "appr-" + intent, Fields: f, Fingerprint: fingerprint(yookassa.OpRefund, f),
	}
}

func ledgerKey(op operation.Operation) string {
	return adapters.TargetKey(op.Key.String(), yookassa.MaxKeyLen)
}

func TestContract(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			b := setup(t, sbyk.Options{}, nil)
			return adaptertest.Setup{Adapter: b.a, Sandbox: b.srv}
		},
		Op: func(intent string, variant int) operation.Operation {
			return charge(intent, "pm-saved-1", 125000+int64(variant)*100, "RUB")
		},
		Invalid: func(intent string) operation.Operation {
			return charge(intent, "pm-saved-1", 125000, "XTS")
		},
		LedgerKey:        ledgerKey,
		Secret:           sbyk.DefaultSecretKey,
		ReplayDedup:      true,
		DetectsMismatch:  true,
		IgnoreKeyEffects: 2, // residual window: a dropped header cannot be seen
		ConcurrentDedup:  true,
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestDeclinedIsFinal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method string
		code   string
	}{
		{sbyk.MethodInsufficientFunds, adapters.CodeInsufficientFunds},
		{sbyk.MethodDeclined, adapters.CodeDeclined},
	}
	for _, c := range cases {
		t.Run(c.method, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sbyk.Options{}, nil)
			op := charge(adaptertest.Intent("decline"), c.method, 5000, "RUB")
			out, err := b.a.Execute(ctx(t), op)
			adaptertest.RequireClass(t, err, adapters.NeverRetry, c.code)
			require.Equal(t, yookassa.StatusCanceled, out.BusinessStatus)

			lr, err := b.a.Lookup(ctx(t), op)
			require.NoError(t, err)
			require.Equal(t, adapters.Found, lr.Status)
			require.True(t, lr.Final)
			require.Equal(t, c.code, lr.Code)
			require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)

			// A repeat replays the decline; the card network saw one attempt.
			_, err = b.a.Execute(ctx(t), op)
			adaptertest.RequireClass(t, err, adapters.NeverRetry, c.code)
			require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))
		})
	}
}

func TestLongKeyIsDigested(t *testing.T) {
	t.Parallel()
	b := setup(t, sbyk.Options{}, nil)
	intent := strings.Repeat("approval-", 20)
	op := charge(intent, "pm-saved-1", 100, "RUB")
	require.Greater(t, len(op.Key.String()), yookassa.MaxKeyLen)
	out, err := b.a.Execute(ctx(t), op)
	require.NoError(t, err)
	require.Len(t, ledgerKey(op), yookassa.MaxKeyLen)
	require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))

	again, err := b.a.Execute(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, out.ObjectID, again.ObjectID)
	require.Equal(t, 1, b.srv.TotalEffects())

	lr, err := b.a.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
}

func TestRefund(t *testing.T) {
	t.Parallel()
	b := setup(t, sbyk.Options{}, nil)
	paid, err := b.a.Execute(ctx(t), charge(adaptertest.Intent("pay"), "pm-saved-1", 10000, "RUB"))
	require.NoError(t, err)

	op := refund(adaptertest.Intent("refund"), paid.ObjectID, 4000)
	lr, err := b.a.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status)

	require.NoError(t, b.srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
	_, err = b.a.Execute(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.ReconcileBeforeRetry, adapters.CodeConnectionLostWhileWaiting)

	lr, err = b.a.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, yookassa.StatusSucceeded, lr.Outcome.BusinessStatus)
	require.Equal(t, paid.ObjectID, lr.Outcome.Details["payment_id"])

	out, err := b.a.Execute(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, lr.Outcome.ObjectID, out.ObjectID)
	require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))

	// More than what is left to refund: a final answer.
	_, err = b.a.Execute(ctx(t), refund(adaptertest.Intent("refund"), paid.ObjectID, 7000))
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeValidation)
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault sandbox.Fault
		class adapters.Class
		code  string
		after time.Duration
	}{
		{"processing_202", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 202,
			Body: `{"type":"processing","description":"Request accepted","retry_after":1800}`}, adapters.ReconcileBeforeRetry, yookassa.CodeProcessing, 1800 * time.Millisecond},
		{"processing_202_error_shape", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 202,
			Body: `{"type":"error","code":"processing","retry_after":1800}`}, adapters.ReconcileBeforeRetry, yookassa.CodeProcessing, 1800 * time.Millisecond},
		{"unknown_500", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 500,
			Body: `{"type":"error","id":"e1","code":"internal_server_error","retry_after":2500}`}, adapters.ReconcileBeforeRetry, adapters.CodeHTTP500, 2500 * time.Millisecond},
		{"forbidden", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 403,
			Body: `{"type":"error","id":"e2","code":"forbidden","description":"no"}`}, adapters.NeverRetry, adapters.CodeAuthorizationDenied, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sbyk.Options{}, nil)
			require.NoError(t, b.srv.InjectFault(c.fault))
			_, err := b.a.Execute(ctx(t), charge(adaptertest.Intent("ans"), "pm-saved-1", 100, "RUB"))
			ae := adaptertest.RequireClass(t, err, c.class, c.code)
			if c.after > 0 {
				require.Equal(t, c.after, ae.RetryAfter)
			}
		})
	}
}

func TestBadCredentials(t *testing.T) {
	t.Parallel()
	const wrong = "wrong-secret-value-123"
	b := setup(t, sbyk.Options{}, func(c *yookassa.Config) { c.SecretKey = wrong })
	op := charge(adaptertest.Intent("auth"), "pm-saved-1", 100, "RUB")
	_, err := b.a.Execute(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeAuthorizationDenied)
	require.NotContains(t, err.Error(), wrong)
	_, err = b.a.Lookup(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeAuthorizationDenied)
	require.Equal(t, 0, b.srv.TotalEffects())
}

func TestLookupPagesAndWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, sbyk.Options{}, func(c *yookassa.Config) { c.LookupMaxPages = 1 })
	target := charge(adaptertest.Intent("paged"), "pm-saved-1", 100, "RUB")
	_, err := b.a.Execute(ctx(t), target)
	require.NoError(t, err)
	for i := range 100 {
		_, err := b.a.Execute(ctx(t), charge(adaptertest.Intent(fmt.Sprint("filler", i)), "pm-saved-1", 100, "RUB"))
		require.NoError(t, err)
	}
	// The match is on page 2; one page allowed: cannot tell.
	lr, err := b.a.Lookup(ctx(t), target)
	require.NoError(t, err)
	require.Equal(t, adapters.Indeterminate, lr.Status)
	require.Equal(t, yookassa.CodeLookupIncomplete, lr.Code)

	// Enough pages: found; outside the window: not found.
	b.a = mustNew(t, b, func(c *yookassa.Config) { c.LookupMaxPages = 3 })
	lr, err = b.a.Lookup(ctx(t), target)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)

	b.a = mustNew(t, b, func(c *yookassa.Config) {
		c.Clock = func() time.Time { return time.Now().Add(72 * time.Hour) }
	})
	lr, err = b.a.Lookup(ctx(t), target)
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status)
}

func TestConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"YOOKASSA_SHOP_ID": "42", "YOOKASSA_SECRET_KEY": "from-env"}
	a, err := yookassa.New(yookassa.Config{Getenv: func(k string) string { return env[k] }})
	require.NoError(t, err)
	require.Equal(t, "yookassa", a.Name())
	require.Equal(t, "payments", a.TargetSystem())

	_, err = yookassa.New(yookassa.Config{Getenv: func(string) string { return "" }})
	require.ErrorIs(t, err, yookassa.ErrInvalidConfig)

	for _, bad := range []yookassa.Config{
		{BaseURL: "ftp://x"}, {BaseURL: "https://user:pw@x"}, {Timeout: -1}, {LookupMaxPages: -1}, {ShopID: "a:b"},
	} {
		require.ErrorIs(t, bad.WithDefaults().Validate(), yookassa.ErrInvalidConfig)
	}
	cfg := yookassa.Config{SecretKey: "s3cr3t-value"}
	require.NotContains(t, fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg), "s3cr3t-value")
}

func TestUnsupportedOperation(t *testing.T) {
	t.Parallel()
	b := setup(t, sbyk.Options{}, nil)
	op := charge(adaptertest.Intent("x"), "pm", 100, "RUB")
	op.Type = "invoice.create"
	_, err := b.a.Execute(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeValidation)
	_, err = b.a.Lookup(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeValidation)
	require.Equal(t, 0, b.srv.TotalEffects())
}
