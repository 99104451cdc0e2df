package onec_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
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
	return invoiceOp(intent, "order-"+intent, variant)
}

// invoiceOp is op with the order id given (at most 128 characters).
func invoiceOp(intent, orderID string, variant int) operation.Operation {
	return adaptertest.Op(onec.OpInvoiceCreate, intent, map[string]any{
		"order_id":     orderID,
		"customer_id":  "cust-17",
		"amount_minor": 125000 + variant*100,
		"currency":     "RUB",
		"due_date":     "2026-01-15",
		"description":  "test invoice",
	})
}

func setup(t *testing.T, mode string) (*onec.Adapter, *sbonec.Server) {
	t.Helper()
	srv := sbonec.New(sbonec.Options{})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	user, pw := srv.Credentials()
	a, err := onec.New(onec.Config{
		BaseURL:    srv.BaseURL(),
		Mode:       mode,
		User:       user,
		Password:   adapters.Password{Value: redact.Secret(pw)},
		HTTPConfig: adapters.HTTPConfig{Timeout: time.Second, Logger: slog.New(slog.DiscardHandler)},
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
		// recognise the replay: the residual double-write window. Its lookup
		// finds the first invoice by the comment marker, and only that one.
		IgnoreKeyEffects: 2,
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
		// The connector drops the attribute; the comment marker is found
		// (substringof) and the replay returns the document.
		IgnoreKeyEffects: 1,
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
			a, err := onec.New(onec.Config{BaseURL: srv.BaseURL(), Mode: mode, User: "integration", Password: adapters.Password{Value: "wrong-pass-xyz"}, HTTPConfig: adapters.HTTPConfig{Timeout: time.Second}})
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
	o := invoiceOp(intent, "order-long", 0)
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
	good := onec.Config{BaseURL: "https://1c.example/base", User: "u", Password: adapters.Password{Value: "p"}}.WithDefaults()
	require.NoError(t, good.Validate())
	require.Equal(t, onec.ModeHTTPService, good.Mode)
	require.Equal(t, onec.DefaultTimeout, good.Timeout)
	for name, c := range map[string]onec.Config{
		"no_url":      {User: "u"},
		"creds_url":   {BaseURL: "https://u:p@1c.example/base", User: "u"},
		"bad_mode":    {BaseURL: "https://1c.example", User: "u", Mode: "soap"},
		"no_user":     {BaseURL: "https://1c.example"},
		"neg_timeout": {BaseURL: "https://1c.example", User: "u", HTTPConfig: adapters.HTTPConfig{Timeout: -1}},
		"bad_doc":     {BaseURL: "https://1c.example", User: "u", Document: "Doc X"},
	} {
		require.ErrorIs(t, c.WithDefaults().Validate(), onec.ErrInvalidConfig, name)
	}
	_, err := onec.New(onec.Config{BaseURL: "https://1c.example", User: "u", HTTPConfig: adapters.HTTPConfig{Getenv: func(string) string { return "" }}})
	require.ErrorIs(t, err, adapters.ErrNoCredential)
	a, err := onec.New(onec.Config{
		BaseURL: "https://1c.example",
		User:    "u",
		HTTPConfig: adapters.HTTPConfig{Getenv: func(k string) string {
			if k == onec.DefaultPasswordEnv {
				return "from-env"
			}
			return ""
		}},
	})
	require.NoError(t, err)
	require.True(t, a.Capabilities().NativeKey)
}

// OData keeps no uniqueness: two owners of one key (a take-over while the
// first call was still running) can both create. Whoever searches next sees
// both documents: the oldest is the operation's, the other is reported.
func TestODataDuplicatesAreReported(t *testing.T) {
	t.Parallel()
	replicaA, srv := setup(t, onec.ModeOData)
	user, pw := srv.Credentials()
	replicaB, err := onec.New(onec.Config{BaseURL: srv.BaseURL(), Mode: onec.ModeOData, User: user, Password: adapters.Password{Value: redact.Secret(pw)}, HTTPConfig: adapters.HTTPConfig{Timeout: time.Second}})
	require.NoError(t, err)
	o := op(adaptertest.Intent("twice"), 0)
	first := adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 1})
	a, err := replicaA.Execute(first, o)
	require.NoError(t, err)
	// Another owner whose search ran before A's create committed creates
	// too: here, a create sent straight to 1C with the same key.
	require.NoError(t, createWithKey(srv, o))
	require.Equal(t, 2, srv.Effects(o.Key.String()))

	keyOnly := o
	keyOnly.Fields = nil
	lr, err := replicaB.Lookup(context.Background(), keyOnly)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, a.ObjectID, lr.Outcome.ObjectID, "the oldest document is the operation's")
	require.Len(t, lr.Outcome.Duplicates, 1)
	require.Equal(t, adapters.CodeDuplicateObjects, lr.Code)

	again, err := replicaB.Execute(adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 2}), o)
	require.NoError(t, err)
	require.Equal(t, a.ObjectID, again.ObjectID)
	require.Equal(t, lr.Outcome.Duplicates, again.Duplicates)
	require.Equal(t, 2, srv.Effects(o.Key.String()), "a retry makes no third")
}

// createWithKey posts a document carrying o's key attribute straight to the
// emulator's OData interface.
func createWithKey(srv *sbonec.Server, o operation.Operation) error {
	body := fmt.Sprintf(`{"Date":"2026-01-10T10:00:00","ВнешнийКлюч":%q,"НомерЗаказа":"order-x","КодКонтрагента":"cust-17",`+
		`"СуммаДокумента":1250.00,"ВалютаДокумента":"RUB","Комментарий":"typed in by hand"}`, o.Key.String())
	req, err := http.NewRequest(http.MethodPost, srv.BaseURL()+"/odata/standard.odata/"+sbonec.DefaultDocument+"?$format=json", strings.NewReader(body))
	if err != nil {
		return err
	}
	user, pw := srv.Credentials()
	req.SetBasicAuth(user, pw)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
