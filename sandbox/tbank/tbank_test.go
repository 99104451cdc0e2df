package tbank_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/sandbox/tbank"
)

func start(t *testing.T, opts tbank.Options) (*tbank.Server, string) {
	t.Helper()
	s := tbank.New(opts)
	base, err := s.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, base
}

// call signs params with the emulator's own Sign and posts them.
func call(t *testing.T, s *tbank.Server, base, method string, params map[string]any, password string) map[string]any {
	t.Helper()
	term, _ := s.Credentials()
	params["TerminalKey"] = term
	raw := map[string]json.RawMessage{}
	for k, v := range params {
		b, _ := json.Marshal(v)
		raw[k] = b
	}
	params["Token"] = tbank.Sign(raw, password)
	body, _ := json.Marshal(params)
	resp, err := http.Post(base+"/v2/"+method, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func TestSignMatchesDocumentedAlgorithm(t *testing.T) {
	t.Parallel()
	raw := map[string]json.RawMessage{
		"TerminalKey": json.RawMessage(`"MerchantTerminalKey"`), "Amount": json.RawMessage(`19200`),
		"OrderId": json.RawMessage(`"00000"`), "Description": json.RawMessage(`"Подарочная карта на 1000 рублей"`),
		"DATA": json.RawMessage(`{"a":"b"}`), "Receipt": json.RawMessage(`[1]`), "Token": json.RawMessage(`"x"`),
	}
	sum := sha256.Sum256([]byte("19200Подарочная карта на 1000 рублей00000pwMerchantTerminalKey"))
	require.Equal(t, hex.EncodeToString(sum[:]), tbank.Sign(raw, "pw"))
}

func TestTokenIsVerified(t *testing.T) {
	t.Parallel()
	s, base := start(t, tbank.Options{})
	out := call(t, s, base, "Init", map[string]any{"Amount": 100, "OrderId": "o-1"}, "wrong")
	require.Equal(t, false, out["Success"])
	require.Equal(t, tbank.CodeBadToken, out["ErrorCode"])
}

func TestInitChargeCheckOrder(t *testing.T) {
	t.Parallel()
	s, base := start(t, tbank.Options{})
	_, pw := s.Credentials()
	ini := call(t, s, base, "Init", map[string]any{"Amount": 100, "OrderId": "o-1", "DATA": map[string]string{"k": "v"}}, pw)
	require.Equal(t, true, ini["Success"])
	require.Equal(t, "NEW", ini["Status"])
	require.Equal(t, 0, s.Effects("o-1"), "Init moves no money")

	dup := call(t, s, base, "Init", map[string]any{"Amount": 100, "OrderId": "o-1"}, pw)
	require.Equal(t, tbank.CodeBadStatus, dup["ErrorCode"])

	ch := call(t, s, base, "Charge", map[string]any{"PaymentId": ini["PaymentId"], "RebillId": "777"}, pw)
	require.Equal(t, "CONFIRMED", ch["Status"])
	again := call(t, s, base, "Charge", map[string]any{"PaymentId": ini["PaymentId"], "RebillId": "777"}, pw)
	require.Equal(t, tbank.CodeBadStatus, again["ErrorCode"])
	require.Equal(t, 1, s.Effects("o-1"))

	co := call(t, s, base, "CheckOrder", map[string]any{"OrderId": "o-1"}, pw)
	ps := co["Payments"].([]any)
	require.Len(t, ps, 1)
	require.Equal(t, "CONFIRMED", ps[0].(map[string]any)["Status"])

	st := call(t, s, base, "GetState", map[string]any{"PaymentId": ini["PaymentId"]}, pw)
	require.Equal(t, "CONFIRMED", st["Status"])

	long := call(t, s, base, "Init", map[string]any{"Amount": 100, "OrderId": "0123456789012345678901234567890123456"}, pw)
	require.Equal(t, tbank.CodeInvalidParams, long["ErrorCode"])
}

func TestDuplicateOrderIDsOption(t *testing.T) {
	t.Parallel()
	s, base := start(t, tbank.Options{DuplicateOrderIDs: true})
	_, pw := s.Credentials()
	for range 2 {
		out := call(t, s, base, "Init", map[string]any{"Amount": 100, "OrderId": "o-2"}, pw)
		require.Equal(t, true, out["Success"])
	}
	co := call(t, s, base, "CheckOrder", map[string]any{"OrderId": "o-2"}, pw)
	require.Len(t, co["Payments"].([]any), 2)
}

func TestIgnoreKeySkipsUniqueness(t *testing.T) {
	t.Parallel()
	s, base := start(t, tbank.Options{})
	_, pw := s.Credentials()
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey, Scope: sandbox.ScopeAny}))
	for range 2 {
		out := call(t, s, base, "Init", map[string]any{"Amount": 100, "OrderId": "o-3"}, pw)
		require.Equal(t, true, out["Success"])
	}
}

func TestCancelExternalRequestID(t *testing.T) {
	t.Parallel()
	s, base := start(t, tbank.Options{})
	_, pw := s.Credentials()
	ini := call(t, s, base, "Init", map[string]any{"Amount": 1000, "OrderId": "o-4"}, pw)
	call(t, s, base, "Charge", map[string]any{"PaymentId": ini["PaymentId"], "RebillId": "1"}, pw)
	for range 2 {
		out := call(t, s, base, "Cancel", map[string]any{"PaymentId": ini["PaymentId"], "Amount": 300, "ExternalRequestId": "r-1"}, pw)
		require.Equal(t, true, out["Success"])
		require.EqualValues(t, 700, out["NewAmount"])
	}
	require.Equal(t, 1, s.Effects("r-1"))
	over := call(t, s, base, "Cancel", map[string]any{"PaymentId": ini["PaymentId"], "Amount": 800, "ExternalRequestId": "r-2"}, pw)
	require.Equal(t, tbank.CodeInvalidParams, over["ErrorCode"])
}

func TestDecline(t *testing.T) {
	t.Parallel()
	s, base := start(t, tbank.Options{})
	_, pw := s.Credentials()
	ini := call(t, s, base, "Init", map[string]any{"Amount": 1000, "OrderId": "o-5"}, pw)
	out := call(t, s, base, "Charge", map[string]any{"PaymentId": ini["PaymentId"], "RebillId": tbank.RebillInsufficientFunds}, pw)
	require.Equal(t, false, out["Success"])
	require.Equal(t, "1051", out["ErrorCode"])
	require.Equal(t, "REJECTED", out["Status"])
}
