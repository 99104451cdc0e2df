package yookassa_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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
	return bundle{srv: srv, a: adapterAt(t, srv, base, time.Second, mod)}
}

func mustNew(t *testing.T, b bundle, mod func(*yookassa.Config)) *yookassa.Adapter {
	t.Helper()
	return adapterAt(t, b.srv, b.srv.URL(), time.Second, mod)
}

// adapterAt is the adapter for srv's shop at baseURL (the emulator, or a
// front of it), with timeout, then mod (when not nil) applied.
func adapterAt(t *testing.T, srv *sbyk.Server, baseURL string, timeout time.Duration, mod func(*yookassa.Config)) *yookassa.Adapter {
	t.Helper()
	shop, secret := srv.Credentials()
	cfg := yookassa.Config{BaseURL: baseURL, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}, HTTPConfig: adapters.HTTPConfig{Timeout: timeout}}
	if mod != nil {
		mod(&cfg)
	}
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
		LedgerKey:         ledgerKey,
		Secret:            sbyk.DefaultSecretKey,
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

	// The reconciler has the key alone (the journal keeps no payload): the
	// refund is still found, among the refunds of every payment.
	other, err := b.a.Execute(ctx(t), charge(adaptertest.Intent("pay"), "pm-saved-1", 5000, "RUB"))
	require.NoError(t, err)
	_, err = b.a.Execute(ctx(t), refund(adaptertest.Intent("refund"), other.ObjectID, 1000))
	require.NoError(t, err)
	keyOnly := op
	keyOnly.Fields = nil
	kr, err := b.a.Lookup(ctx(t), keyOnly)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, kr.Status)
	require.Equal(t, lr.Outcome.ObjectID, kr.Outcome.ObjectID)

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
	b := setup(t, sbyk.Options{}, func(c *yookassa.Config) { c.SecretKey.Value = wrong })
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
	a, err := yookassa.New(yookassa.Config{HTTPConfig: adapters.HTTPConfig{Getenv: func(k string) string { return env[k] }}})
	require.NoError(t, err)
	require.Equal(t, "yookassa", a.Name())
	require.Equal(t, "payments", a.TargetSystem())

	_, err = yookassa.New(yookassa.Config{HTTPConfig: adapters.HTTPConfig{Getenv: func(string) string { return "" }}})
	require.ErrorIs(t, err, yookassa.ErrInvalidConfig)

	for _, bad := range []yookassa.Config{
		{BaseURL: "ftp://x"}, {BaseURL: "https://user:pw@x"}, {HTTPConfig: adapters.HTTPConfig{Timeout: -1}}, {LookupScan: adapters.LookupScan{LookupMaxPages: -1}}, {LookupLate: -time.Second}, {ShopID: "a:b"},
	} {
		require.ErrorIs(t, bad.WithDefaults().Validate(), yookassa.ErrInvalidConfig)
	}
	cfg := yookassa.Config{SecretKey: adapters.SecretKey{Value: "s3cr3t-value"}}
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

// front serves the emulator through a handler that runs before(r) first,
// and returns an adapter pointed at it.
func front(t *testing.T, srv *sbyk.Server, mod func(*yookassa.Config), before func(r *http.Request)) *yookassa.Adapter {
	t.Helper()
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		before(r)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return adapterAt(t, srv, ts.URL, 5*time.Second, mod)
}

// createPayments makes n payments straight in the emulator.
func createPayments(t *testing.T, srv *sbyk.Server, n int) {
	t.Helper()
	shop, secret := srv.Credentials()
	for range n {
		body := `{"amount":{"value":"1.00","currency":"RUB"},"capture":true,"payment_method_id":"pm-other"}`
		req := httptest.NewRequest(http.MethodPost, "/v3/payments", strings.NewReader(body))
		req.SetBasicAuth(shop, secret)
		req.Header.Set("Idempotence-Key", adaptertest.Intent("other"))
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
	}
}

// Payments created while a lookup pages through the list must not make one
// charge look like two: a lookup that counted the same payment on two pages
// reported "duplicates: 1" for a single charge (a false double-charge
// alarm). Here 50 payments are created before every page after the first.
func TestLookupDuringCreationCountsOneChargeOnce(t *testing.T) {
	t.Parallel()
	srv := sbyk.New(sbyk.Options{})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	var creating atomic.Bool
	a := front(t, srv, nil, func(r *http.Request) {
		if creating.Load() && r.Method == http.MethodGet && r.URL.Query().Get("cursor") != "" {
			createPayments(t, srv, 50)
		}
	})
	target := charge(adaptertest.Intent("single"), "pm-saved-1", 100, "RUB")
	createPayments(t, srv, 50)
	out, err := a.Execute(ctx(t), target)
	require.NoError(t, err)
	createPayments(t, srv, 60)

	creating.Store(true)
	for _, op := range []operation.Operation{target, keyOnly(target)} {
		lr, err := a.Lookup(ctx(t), op)
		require.NoError(t, err)
		require.Equal(t, adapters.Found, lr.Status)
		require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
		require.Empty(t, lr.Outcome.Duplicates, "one charge reported as several")
		require.NotContains(t, lr.Outcome.Details, "duplicates")
		require.NotEqual(t, adapters.CodeDuplicateObjects, lr.Code)
	}
	require.Equal(t, 1, srv.Effects(ledgerKey(target)), "the ledger holds one charge")
}

func keyOnly(op operation.Operation) operation.Operation {
	op.Fields = nil
	return op
}

// Behind a connector that drops Idempotence-Key (declared:
// connector_drops_key) a retried charge is a second payment: the lookup and
// the retried Execute report it (the oldest payment stays the operation's),
// and the ledger shows both.
func TestKeyDroppingConnectorDuplicateIsReported(t *testing.T) {
	t.Parallel()
	b := setup(t, sbyk.Options{}, func(c *yookassa.Config) { c.ConnectorDropsKey = true })
	require.NoError(t, b.srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey}))
	op := charge(adaptertest.Intent("dropped"), "pm-saved-1", 100, "RUB")
	since := time.Now().Add(-time.Second)
	first, err := b.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), op)
	require.NoError(t, err)
	require.Empty(t, first.Duplicates)
	second, err := b.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: since}), op)
	require.NoError(t, err)
	require.Equal(t, 2, b.srv.Effects(ledgerKey(op)), "the connector let a second charge through")
	require.Equal(t, first.ObjectID, second.ObjectID, "the oldest payment stays the operation's")
	require.Len(t, second.Duplicates, 1)
	require.NotEqual(t, first.ObjectID, second.Duplicates[0])
	require.Equal(t, 1, second.Details["duplicates"])

	lr, err := b.a.Lookup(ctx(t), keyOnly(op))
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, first.ObjectID, lr.Outcome.ObjectID)
	require.Equal(t, second.Duplicates, lr.Outcome.Duplicates)
	require.Equal(t, adapters.CodeDuplicateObjects, lr.Code)
}

// With the journal's first sight of the key at hand, the scan starts just
// before it instead of LookupWindow ago: older payments are not read.
func TestLookupWindowStartsAtTheKeysFirstAttempt(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	srv := sbyk.New(sbyk.Options{Options: sandbox.Options{Clock: clock}})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	var pages atomic.Int32
	a := front(t, srv, func(c *yookassa.Config) { c.Clock = clock }, func(r *http.Request) {
		if r.Method == http.MethodGet {
			pages.Add(1)
		}
	})
	createPayments(t, srv, 250)
	now.Add(int64(time.Hour))
	since := clock()
	op := charge(adaptertest.Intent("window"), "pm-saved-1", 100, "RUB")
	out, err := a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), op)
	require.NoError(t, err)

	pages.Store(0)
	lr, err := a.Lookup(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), keyOnly(op))
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
	require.Equal(t, int32(1), pages.Load(), "one page: the window starts at the key's first attempt")

	pages.Store(0)
	lr, err = a.Lookup(ctx(t), keyOnly(op))
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, int32(3), pages.Load(), "without it the whole lookup window is read")
}

// lookupRig is an emulator on a clock the test moves (now, in Unix
// nanoseconds), and an adapter in front of it that counts the list pages
// it reads, with the lookup's page cap and clock skew given.
func lookupRig(t *testing.T, maxPages int, skew time.Duration, mods ...func(*yookassa.Config)) (now *atomic.Int64, clock func() time.Time, srv *sbyk.Server, a *yookassa.Adapter, pages *atomic.Int32) {
	t.Helper()
	now, pages = new(atomic.Int64), new(atomic.Int32)
	now.Store(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	clock = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	srv = sbyk.New(sbyk.Options{Options: sandbox.Options{Clock: clock}})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	a = front(t, srv, func(c *yookassa.Config) {
		c.Clock, c.LookupMaxPages, c.LookupSkew, c.Timeout = clock, maxPages, skew, 10*time.Second
		for _, mod := range mods {
			mod(c)
		}
	}, func(r *http.Request) {
		if r.Method == http.MethodGet {
			pages.Add(1)
		}
	})
	return now, clock, srv, a, pages
}

// A key first seen a while ago, with many payments created since: the lists
// run newest first, but the scan reads the window of the first attempt
// (LookupSkew around the key's first sight, plus a call) before the rest,
// so the payment is found in one page however many came after it, and a
// key with no payment is still "not found" only once both parts were read.
func TestLookupReadsTheFirstAttemptsWindowFirst(t *testing.T) {
	t.Parallel()
	now, clock, srv, a, pages := lookupRig(t, 2, 5*time.Second)
	since := clock()
	op := charge(adaptertest.Intent("early"), "pm-saved-1", 100, "RUB")
	att := adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since})
	out, err := a.Execute(att, op)
	require.NoError(t, err)
	now.Add(int64(time.Minute))
	createPayments(t, srv, 350) // four pages newer than the key's payment

	pages.Store(0)
	lr, err := a.Lookup(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: since}), keyOnly(op))
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status, "beyond two pages of newer payments")
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
	require.Equal(t, int32(1), pages.Load(), "the first attempt's window alone")

	// No payment for this key: the rest is read too, and past the page cap
	// that cannot be "not found".
	missing := charge(adaptertest.Intent("missing"), "pm-saved-1", 100, "RUB")
	lr, err = a.Lookup(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: since}), keyOnly(missing))
	require.NoError(t, err)
	require.Equal(t, adapters.Indeterminate, lr.Status)
	require.Equal(t, yookassa.CodeLookupIncomplete, lr.Code)
	a2 := front(t, srv, func(c *yookassa.Config) {
		c.Clock, c.LookupMaxPages, c.LookupSkew, c.Timeout = clock, 5, 5*time.Second, 10*time.Second
	}, func(*http.Request) {})
	lr, err = a2.Lookup(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: since}), keyOnly(missing))
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status)
	require.Equal(t, 1+350, srv.TotalEffects())
}

// With the end of the key's last call at hand (Attempt.Until), the first
// window ends LookupSkew after it, not a whole call (Timeout) after the
// key's first sight: the payments made after the calls are not read before
// the key's payment is found. The payment made inside the window is the
// operation's, and one with the same key made outside it (a connector that
// dropped Idempotence-Key let a second charge through later) is not taken
// for it. A payment the target committed only after the calls had ended,
// past the first window, is still found: the rest is read before an answer
// may be "not found". (A connector that drops the key is declared: the
// whole window of the calls is read, for every payment with the key.)
func TestLookupWindowEndsAtTheLastCall(t *testing.T) {
	t.Parallel()
	now, clock, srv, a, pages := lookupRig(t, 20, time.Second, func(c *yookassa.Config) { c.ConnectorDropsKey = true })
	since := clock()
	first := adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since})
	op := charge(adaptertest.Intent("inside"), "pm-saved-1", 100, "RUB")
	out, err := a.Execute(first, op)
	require.NoError(t, err)
	now.Add(int64(500 * time.Millisecond))
	until := clock()
	now.Add(int64(3 * time.Second)) // past until+skew, within since+skew+Timeout
	createPayments(t, srv, 350)
	require.NoError(t, srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey}))
	dup, err := a.Execute(first, op)
	require.NoError(t, err)
	srv.ClearFaults()
	require.NotEqual(t, out.ObjectID, dup.ObjectID)
	require.Equal(t, 2, srv.Effects(ledgerKey(op)))
	now.Add(int64(time.Minute))

	pages.Store(0)
	lr, err := a.Lookup(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: since, Until: until}), keyOnly(op))
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID, "the payment inside the window is the operation's")
	require.Empty(t, lr.Outcome.Duplicates)
	require.Equal(t, int32(1), pages.Load(), "the window of the calls alone")

	// Without the end, the first window reaches a call past the first
	// sight: the 350 payments and the second charge are read too.
	pages.Store(0)
	lr, err = a.Lookup(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: since}), keyOnly(op))
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID, "the oldest payment stays the operation's")
	require.Equal(t, []string{dup.ObjectID}, lr.Outcome.Duplicates)
	require.Greater(t, pages.Load(), int32(3))

	// A payment committed after the calls ended (here: ten seconds after
	// until), past the first window: found all the same.
	since = clock()
	late := charge(adaptertest.Intent("late"), "pm-saved-1", 100, "RUB")
	now.Add(int64(time.Second))
	until = clock()
	now.Add(int64(10 * time.Second))
	lateOut, err := a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), late)
	require.NoError(t, err)
	now.Add(int64(time.Minute))
	lr, err = a.Lookup(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: since, Until: until}), keyOnly(late))
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status, "a late commit is found past the first window")
	require.Equal(t, lateOut.ObjectID, lr.Outcome.ObjectID)

	// A key without a payment is "not found" once both parts were read.
	missing := charge(adaptertest.Intent("missing"), "pm-saved-1", 100, "RUB")
	lr, err = a.Lookup(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: since, Until: until}), keyOnly(missing))
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status)
}
