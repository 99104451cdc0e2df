package onec_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
)

func op(intent string, variant int) operation.Operation {
	return operation.Operation{
		Key:          adaptertest.Key(onec.OpInvoiceCreate, intent),
		Type:         onec.OpInvoiceCreate,
		TargetSystem: "1c",
		Fields: map[string]any{
			"order_id":     "order-" + intent,
			"customer_id":  "cust-17",
			"amount_minor": int64(125000 + variant*100),
			"currency":     "RUB",
			"due_date":     time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC),
			"description":  "test invoice",
		},
		Fingerprint: fmt.Sprintf("fp-%s-%d", intent, variant),
	}
}

func setup(t *testing.T, mode string) (*onec.Adapter, *sbonec.Server) {
	t.Helper()
	srv := sbonec.New(sbonec.Options{})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	user, pw := srv.Credentials()
	a, err := onec.New(onec.Config{
		BaseURL: srv.BaseURL(), Mode: mode, User: user, Password: redact.Secret(pw),
		Timeout: time.Second, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	return a, srv
}

func TestContractHTTPService(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			a, srv := setup(t, onec.ModeHTTPService)
			return adaptertest.Setup{Adapter: a, Sandbox: srv}
		},
		Op: op,
		Invalid: func(intent string) operation.Operation {
			o := op(intent, 0)
			o.Fields["customer_id"] = "unknown-customer" // the 1C side refuses it (422)
			return o
		},
		Secret:          sbonec.DefaultPassword,
		ReplayDedup:     true,
		DetectsMismatch: true,
		// Behind a connector that drops Idempotency-Key the service cannot
		// recognise the replay: the residual double-write window.
		IgnoreKeyEffects: 2,
		BadGatewayClass:  adapters.ReconcileBeforeRetry,
		ConcurrentDedup:  true,
	})
}

func TestContractOData(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			a, srv := setup(t, onec.ModeOData)
			return adaptertest.Setup{Adapter: a, Sandbox: srv}
		},
		Op: op,
		Invalid: func(intent string) operation.Operation {
			o := op(intent, 0)
			o.Fields["amount_minor"] = int64(0)
			return o
		},
		Secret:          sbonec.DefaultPassword,
		ReplayDedup:     true, // search before create, single-flight per key
		DetectsMismatch: true, // the found document is checked against the payload
		// The connector drops the attribute: search finds nothing, a replay
		// creates a second document (logged, key_stored=false).
		IgnoreKeyEffects: 2,
		BadGatewayClass:  adapters.ReconcileBeforeRetry,
		ConcurrentDedup:  true,
	})
}

func TestWrongPasswordIsFinalAndSafe(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{onec.ModeHTTPService, onec.ModeOData} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			srv := sbonec.New(sbonec.Options{})
			_, err := srv.Start("")
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			a, err := onec.New(onec.Config{BaseURL: srv.BaseURL(), Mode: mode, User: "integration", Password: "wrong-pass-xyz", Timeout: time.Second})
			require.NoError(t, err)
			o := op(adaptertest.Intent("auth"), 0)
			_, err = a.Execute(context.Background(), o)
			adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeAuthorizationDenied)
			require.NotContains(t, err.Error(), "wrong-pass-xyz")
			_, err = a.Lookup(context.Background(), o)
			adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeAuthorizationDenied)
			require.Equal(t, 0, srv.TotalEffects())
		})
	}
}

func TestLongKeyIsDigested(t *testing.T) {
	t.Parallel()
	a, srv := setup(t, onec.ModeHTTPService)
	intent := "x"
	for len(intent) < 200 {
		intent += "-long-intent"
	}
	o := op(intent, 0)
	out, err := a.Execute(context.Background(), o)
	require.NoError(t, err)
	lk := adapters.TargetKey(o.Key.String(), onec.DefaultMaxKeyLen)
	require.Len(t, lk, onec.DefaultMaxKeyLen)
	require.Equal(t, 1, srv.Effects(lk))
	lr, err := a.Lookup(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
}

func TestInvalidOperationsAreRefusedLocally(t *testing.T) {
	t.Parallel()
	a, srv := setup(t, onec.ModeHTTPService)
	for name, mut := range map[string]func(o *operation.Operation){
		"wrong_type":   func(o *operation.Operation) { o.Type = "crm.task.create" },
		"no_order":     func(o *operation.Operation) { delete(o.Fields, "order_id") },
		"no_currency":  func(o *operation.Operation) { delete(o.Fields, "currency") },
		"zero_amount":  func(o *operation.Operation) { o.Fields["amount_minor"] = int64(0) },
		"wrong_amount": func(o *operation.Operation) { o.Fields["amount_minor"] = "100" },
	} {
		o := op(adaptertest.Intent(name), 0)
		mut(&o)
		_, err := a.Execute(context.Background(), o)
		adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeValidation)
	}
	require.Equal(t, 0, srv.TotalEffects())
}

func TestConfig(t *testing.T) {
	t.Parallel()
	good := onec.Config{BaseURL: "https://1c.example/base", User: "u", Password: "p"}.WithDefaults()
	require.NoError(t, good.Validate())
	require.Equal(t, onec.ModeHTTPService, good.Mode)
	require.Equal(t, onec.DefaultTimeout, good.Timeout)
	for name, c := range map[string]onec.Config{
		"no_url":      {User: "u"},
		"creds_url":   {BaseURL: "https://u:p@1c.example/base", User: "u"},
		"bad_mode":    {BaseURL: "https://1c.example", User: "u", Mode: "soap"},
		"no_user":     {BaseURL: "https://1c.example"},
		"neg_timeout": {BaseURL: "https://1c.example", User: "u", Timeout: -1},
		"bad_doc":     {BaseURL: "https://1c.example", User: "u", Document: "Doc X"},
	} {
		require.ErrorIs(t, c.WithDefaults().Validate(), onec.ErrInvalidConfig, name)
	}
	_, err := onec.New(onec.Config{BaseURL: "https://1c.example", User: "u", Getenv: func(string) string { return "" }})
	require.ErrorIs(t, err, adapters.ErrNoCredential)
	a, err := onec.New(onec.Config{BaseURL: "https://1c.example", User: "u", Getenv: func(k string) string {
		if k == onec.DefaultPasswordEnv {
			return "from-env"
		}
		return ""
	}})
	require.NoError(t, err)
	require.True(t, a.Capabilities().NativeKey)
}
