package tbank

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/tbank/tbanktoken"
)

// The documented example: Amount, Description, OrderId, Password and
// TerminalKey sorted by name, values concatenated, SHA-256.
func TestTokenDocExample(t *testing.T) {
	params := map[string]any{
		"TerminalKey": "MerchantTerminalKey", "Amount": int64(19200), "OrderId": "00000",
		"Description": "Подарочная карта на 1000 рублей", "DATA": map[string]string{"x": "y"}, "Token": "old",
	}
	sum := sha256.Sum256([]byte("19200" + "Подарочная карта на 1000 рублей" + "00000" + "secret-pw" + "MerchantTerminalKey"))
	require.Equal(t, hex.EncodeToString(sum[:]), tbanktoken.Of(params, "secret-pw"))
}

// FuzzAnswer: arbitrary bodies never panic, and a 200 body is accepted only
// as a well-formed envelope.
func FuzzAnswer(f *testing.F) {
	f.Add([]byte(`{"Success":true,"ErrorCode":"0","Status":"CONFIRMED","PaymentId":"4000000001","OrderId":"o","Amount":100}`))
	f.Add([]byte(`{"Success":false,"ErrorCode":"1051","Status":"REJECTED","PaymentId":4000000001}`))
	f.Add([]byte(`{"Success":true,"ErrorCode":"0","OrderId":"o","Payments":[{"PaymentId":"1","Amount":1,"Status":"NEW","Success":true,"ErrorCode":"0"}]}`))
	f.Add([]byte(`{"Success":true,"ErrorCode":"7"}`))
	f.Add([]byte(`{"Success":"yes"}`))
	f.Add([]byte("<html>"))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := parseAnswer(body)
		if err == nil {
			require.NotNil(t, a.Success)
			require.Equal(t, *a.Success, a.ErrorCode == "0")
		}
	})
}

// FuzzExecute serves one arbitrary body for every method: Execute and
// Lookup never panic, every failure is a classified *adapters.Error without
// the body, and a success names a numeric PaymentId.
func FuzzExecute(f *testing.F) {
	f.Add([]byte(`{"Success":true,"ErrorCode":"0","OrderId":"x","Payments":[{"PaymentId":"12","Amount":100,"Status":"CONFIRMED","Success":true,"ErrorCode":"0"}]}`))
	f.Add([]byte(`{"Success":true,"ErrorCode":"0","Payments":[]}`))
	f.Add([]byte(`{"Success":false,"ErrorCode":"204"}`))
	f.Add([]byte(`{"Success":true,"ErrorCode":"0","Payments":[{"PaymentId":[],"Amount":"x"}]}`))
	var body atomic.Value
	body.Store([]byte{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(body.Load().([]byte))
	}))
	defer srv.Close()
	a, err := New(Config{BaseURL: srv.URL, TerminalKey: "T", Password: adapters.Password{Value: "p"}, HTTPConfig: adapters.HTTPConfig{Timeout: 2 * time.Second}})
	require.NoError(f, err)
	op := adaptertest.Op(OpCharge, "i", map[string]any{"account_id": "1", "order_id": "o", "amount_minor": 100, "currency": "RUB"})
	f.Fuzz(func(t *testing.T, b []byte) {
		body.Store(b)
		out, err := a.Execute(context.Background(), op)
		if err == nil {
			require.True(t, safeID(out.ObjectID))
		} else {
			ae := adapters.AsError(err)
			require.True(t, ae.Class.Valid())
			require.NotEmpty(t, ae.Code)
			if len(b) > 8 {
				require.NotContains(t, err.Error(), string(b))
			}
		}
		lr, err := a.Lookup(context.Background(), op)
		if err == nil {
			require.Contains(t, []adapters.LookupStatus{adapters.Found, adapters.NotFound, adapters.Indeterminate}, lr.Status)
		}
	})
}
