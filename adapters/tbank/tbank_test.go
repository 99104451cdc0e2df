package tbank_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/tbank"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sbtb "github.com/idemgate/idemgate/sandbox/tbank"
)

type bundle struct {
	srv *sbtb.Server
	a   *tbank.Adapter
}

func setup(t *testing.T, opts sbtb.Options, mod func(*tbank.Config)) bundle {
	t.Helper()
	srv := sbtb.New(opts)
	base, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	term, pw := srv.Credentials()
	cfg := tbank.Config{
		BaseURL:       base,
		TerminalKey:   term,
		Password:      adapters.Password{Value: redact.Secret(pw)},
		OrderIDUnique: !opts.DuplicateOrderIDs,
		HTTPConfig:    adapters.HTTPConfig{Timeout: time.Second},
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := tbank.New(cfg)
	require.NoError(t, err)
	return bundle{srv: srv, a: a}
}

func charge(intent, rebill string, amount int64, currency string) operation.Operation {
	f := map[string]any{"account_id": rebill, "order_id": "order-" + intent, "amount_minor": amount, "currency": currency}
	return adaptertest.Op(tbank.OpCharge, intent, f)
}

func refund(intent, paymentID string, amount int64) operation.Operation {
	f := map[string]any{"payment_id": paymentID, "amount_minor": amount, "currency": "RUB"}
	return adaptertest.Op(tbank.OpRefund, intent, f)
}

func ledgerKey(op operation.Operation) string {
	return adapters.TargetKey(op.Key.String(), tbank.MaxKeyLen)
}

func harness(dups bool) adaptertest.Harness {
	return adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			b := setup(t, sbtb.Options{DuplicateOrderIDs: dups}, nil)
			return adaptertest.Setup{Adapter: b.a, Sandbox: b.srv}
		},
		Op: func(intent string, variant int) operation.Operation {
			return charge(intent, "1000000001", 125000+int64(variant)*100, "RUB")
		},
		Invalid: func(intent string) operation.Operation {
			return charge(intent, "1000000001", 125000, "USD")
		},
		LedgerKey:       ledgerKey,
		Secret:          sbtb.DefaultPassword,
		ReplayDedup:     true, // CheckOrder before Init
		DetectsMismatch: true, // CheckOrder shows another Amount
		// The lookup before Init sees the first charge even when the
		// terminal does not check OrderId uniqueness.
		IgnoreKeyEffects: 1,
		// Concurrent Executes: only a terminal that refuses a repeated
		// OrderId serialises them; otherwise the journal lease does.
		ConcurrentDedup: !dups,
	}
}

func TestContract(t *testing.T) {
	t.Parallel()
	t.Run("unique_order_id", func(t *testing.T) { t.Parallel(); adaptertest.Run(t, harness(false)) })
	t.Run("duplicate_order_ids", func(t *testing.T) { t.Parallel(); adaptertest.Run(t, harness(true)) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	c := setup(t, sbtb.Options{}, func(c *tbank.Config) { c.OrderIDUnique = false }).a.Capabilities()
	require.True(t, c.SingleFlight)
	require.False(t, c.NativeKey)
	require.Equal(t, 36, c.MaxKeyLen)
}

func TestBadTokenIsDenied(t *testing.T) {
	t.Parallel()
	const wrong = "not-the-terminal-password"
	b := setup(t, sbtb.Options{}, func(c *tbank.Config) { c.Password.Value = wrong })
	op := charge(adaptertest.Intent("token"), "1000000001", 100, "RUB")
	_, err := b.a.Execute(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeAuthorizationDenied)
	require.NotContains(t, err.Error(), wrong)
	_, err = b.a.Lookup(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeAuthorizationDenied)
	require.Equal(t, 0, b.srv.TotalEffects())
}

func TestDeclinedIsFinal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rebill, code string }{
		{sbtb.RebillInsufficientFunds, adapters.CodeInsufficientFunds},
		{sbtb.RebillDeclined, adapters.CodeDeclined},
	} {
		t.Run(c.rebill, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sbtb.Options{}, nil)
			op := charge(adaptertest.Intent("decline"), c.rebill, 5000, "RUB")
			out, err := b.a.Execute(ctx(t), op)
			adaptertest.RequireClass(t, err, adapters.NeverRetry, c.code)
			require.Equal(t, tbank.StatusRejected, out.BusinessStatus)

			lr, err := b.a.Lookup(ctx(t), op)
			require.NoError(t, err)
			require.Equal(t, adapters.Found, lr.Status)
			require.True(t, lr.Final)
			require.Equal(t, c.code, lr.Code)

			_, err = b.a.Execute(ctx(t), op)
			adaptertest.RequireClass(t, err, adapters.NeverRetry, c.code)
			require.Equal(t, 1, b.srv.Effects(ledgerKey(op)), "the card network saw one attempt")
		})
	}
}

func TestRefund(t *testing.T) {
	t.Parallel()
	b := setup(t, sbtb.Options{}, nil)
	paid, err := b.a.Execute(ctx(t), charge(adaptertest.Intent("pay"), "1000000001", 10000, "RUB"))
	require.NoError(t, err)

	op := refund(adaptertest.Intent("refund"), paid.ObjectID, 4000)
	require.NoError(t, b.srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
	_, err = b.a.Execute(ctx(t), op)
	adaptertest.RequireClass(t, err, adapters.ReconcileBeforeRetry, "")
	lr, err := b.a.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.Indeterminate, lr.Status)
	require.Equal(t, adapters.CodeLookupUnsupported, lr.Code)

	// Repeating Cancel with the same ExternalRequestId refunds nothing more.
	out, err := b.a.Execute(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, "PARTIAL_REFUNDED", out.BusinessStatus)
	require.EqualValues(t, 6000, out.Details["remaining_minor"])
	require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))

	_, err = b.a.Execute(ctx(t), refund(adaptertest.Intent("refund"), paid.ObjectID, 7000))
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeValidation)
}

func TestLongKey(t *testing.T) {
	t.Parallel()
	b := setup(t, sbtb.Options{}, nil)
	op := charge(adaptertest.Intent("a-rather-long-intent-identifier"), "1000000001", 100, "RUB")
	require.Greater(t, len(op.Key.String()), tbank.MaxKeyLen)
	out, err := b.a.Execute(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, tbank.StatusConfirmed, out.BusinessStatus)
	require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))
	require.Len(t, ledgerKey(op), tbank.MaxKeyLen)
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TBANK_TERMINAL_KEY": "T1", "TBANK_PASSWORD": "pw"}
	a, err := tbank.New(tbank.Config{HTTPConfig: adapters.HTTPConfig{Getenv: func(k string) string { return env[k] }}})
	require.NoError(t, err)
	require.Equal(t, "tbank", a.Name())
	_, err = tbank.New(tbank.Config{HTTPConfig: adapters.HTTPConfig{Getenv: func(string) string { return "" }}})
	require.ErrorIs(t, err, tbank.ErrInvalidConfig)
	require.ErrorIs(t, tbank.Config{BaseURL: "https://u:p@h"}.WithDefaults().Validate(), tbank.ErrInvalidConfig)
}
