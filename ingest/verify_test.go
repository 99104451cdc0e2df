package ingest_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/redact"
)

func hexHMAC(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func b64HMAC(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func mustStandardKey(secret string) []byte {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	return k
}

// tokenByHand computes a T-Bank token the way the documentation describes it.
func tokenByHand(fields map[string]any, password string) string {
	pairs := map[string]string{"Password": password}
	for k, v := range fields {
		switch v := v.(type) {
		case string:
			pairs[k] = v
		case json.Number:
			pairs[k] = string(v)
		case bool:
			pairs[k] = fmt.Sprint(v)
		}
	}
	delete(pairs, "Token")
	pairs["Password"] = password
	keys := make([]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		sb.WriteString(pairs[k])
	}
	sum := sha256.Sum256([]byte(sb.String()))
	return hex.EncodeToString(sum[:])
}

func TestStandardSignatureSpecVector(t *testing.T) {
	t.Parallel()
	// The Standard Webhooks specification's published test vector.
	key, err := ingest.StandardKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	body := []byte(`{"test": 2432232314}`)
	sig := ingest.StandardSignature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", sig)

	at := time.Unix(1614265330, 0)
	require.NoError(t, ingest.VerifyStandard("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
		"v1,bm9wZQ== "+sig, body, [][]byte{key}, at, 5*time.Minute))
	// The bare base64 secret (no whsec_ prefix) is the same key.
	bare, err := ingest.StandardKey("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	require.Equal(t, key, bare)
}

func TestTBankTokenDocumentationExample(t *testing.T) {
	t.Parallel()
	// The example of developer.tbank.ru/eacq/intro/developer/token: root
	// scalars plus Password, sorted by key, values concatenated, SHA-256.
	fields := map[string]any{
		"TerminalKey": "MerchantTerminalKey", "Amount": json.Number("19200"), "OrderId": "00000",
		"Description": "Подарочная карта на 1000 рублей",
		"DATA":        map[string]any{"Phone": "+71234567890"},
		"Receipt":     map[string]any{"Items": []any{}},
	}
	want := sha256.Sum256([]byte("19200" + "Подарочная карта на 1000 рублей" + "00000" + "11111111111111" + "MerchantTerminalKey"))
	require.Equal(t, hex.EncodeToString(want[:]), ingest.TBankToken(fields, "11111111111111"))
	require.Equal(t, "72dd466f8ace0a37a1f740ce5fb78101712bc0665d91a8108c7c8a0ccd426db2", ingest.TBankToken(fields, "11111111111111"))
	// Booleans are "true"/"false"; nulls and Token are left out.
	fields["Success"] = true
	fields["Token"] = "ignored"
	fields["Nothing"] = nil
	require.Equal(t, tokenByHand(fields, "pw"), ingest.TBankToken(fields, "pw"))
}

func TestVerifyStripe(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","type":"x"}`)
	secrets := []redact.Secret{stripeOld, stripeNew}
	ts := fixedNow.Unix()
	sig := func(secret string, ts int64, body []byte) string {
		return hexHMAC([]byte(secret), fmt.Sprintf("%d.%s", ts, body))
	}
	tests := []struct {
		name   string
		header string
		body   []byte
		want   error
	}{
		{"new secret", fmt.Sprintf("t=%d,v1=%s", ts, sig(stripeNew, ts, body)), body, nil},
		{"old secret during rotation", fmt.Sprintf("t=%d,v1=%s", ts, sig(stripeOld, ts, body)), body, nil},
		{"both signatures", fmt.Sprintf("t=%d,v1=%s,v1=%s,v0=abc", ts, sig("whsec_other", ts, body), sig(stripeNew, ts, body)), body, nil},
		{"spaces around items", fmt.Sprintf("t=%d, v1=%s", ts, sig(stripeNew, ts, body)), body, nil},
		{"tampered body", fmt.Sprintf("t=%d,v1=%s", ts, sig(stripeNew, ts, body)), []byte(`{"id":"evt_2","type":"x"}`), ingest.ErrSignatureMismatch},
		{"unknown secret", fmt.Sprintf("t=%d,v1=%s", ts, sig("whsec_retired", ts, body)), body, ingest.ErrSignatureMismatch},
		{"timestamp changed", fmt.Sprintf("t=%d,v1=%s", ts+1, sig(stripeNew, ts, body)), body, ingest.ErrSignatureMismatch},
		{"expired", fmt.Sprintf("t=%d,v1=%s", ts-301, sig(stripeNew, ts-301, body)), body, ingest.ErrTimestampOutOfTolerance},
		{"future", fmt.Sprintf("t=%d,v1=%s", ts+301, sig(stripeNew, ts+301, body)), body, ingest.ErrTimestampOutOfTolerance},
		{"edge of tolerance", fmt.Sprintf("t=%d,v1=%s", ts-300, sig(stripeNew, ts-300, body)), body, nil},
		{"missing", "", body, ingest.ErrSignatureMissing},
		{"no v1", fmt.Sprintf("t=%d,v0=%s", ts, sig(stripeNew, ts, body)), body, ingest.ErrSignatureMissing},
		{"no timestamp", "v1=" + sig(stripeNew, ts, body), body, ingest.ErrSignatureMalformed},
		{"two timestamps", fmt.Sprintf("t=%d,t=%d,v1=%s", ts, ts, sig(stripeNew, ts, body)), body, ingest.ErrSignatureMalformed},
		{"signed timestamp", fmt.Sprintf("t=+%d,v1=%s", ts, sig(stripeNew, ts, body)), body, ingest.ErrSignatureMalformed},
		{"garbage", "t", body, ingest.ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ingest.VerifyStripe(tt.header, tt.body, secrets, fixedNow, 5*time.Minute)
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
}

func TestVerifyStandard(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"invoice.paid"}`)
	keys := [][]byte{mustStandardKey(standardOld), mustStandardKey(standardNew)}
	ts := fixedNow.Unix()
	sig := func(secret, id string, ts int64, body []byte) string {
		return "v1," + b64HMAC(mustStandardKey(secret), fmt.Sprintf("%s.%d.%s", id, ts, body))
	}
	tsS := fmt.Sprint(ts)
	tests := []struct {
		name      string
		id, ts    string
		signature string
		body      []byte
		want      error
	}{
		{"new secret", "msg_1", tsS, sig(standardNew, "msg_1", ts, body), body, nil},
		{"old secret during rotation", "msg_1", tsS, sig(standardOld, "msg_1", ts, body), body, nil},
		{"several entries", "msg_1", tsS, "v1a,abc v1,bm9wZQ== " + sig(standardNew, "msg_1", ts, body), body, nil},
		{"tampered body", "msg_1", tsS, sig(standardNew, "msg_1", ts, body), []byte(`{"type":"invoice.void"}`), ingest.ErrSignatureMismatch},
		{"other id", "msg_2", tsS, sig(standardNew, "msg_1", ts, body), body, ingest.ErrSignatureMismatch},
		{"unknown secret", "msg_1", tsS, sig("whsec_cmV0aXJlZA==", "msg_1", ts, body), body, ingest.ErrSignatureMismatch},
		{"expired", "msg_1", fmt.Sprint(ts - 600), sig(standardNew, "msg_1", ts-600, body), body, ingest.ErrTimestampOutOfTolerance},
		{"future", "msg_1", fmt.Sprint(ts + 600), sig(standardNew, "msg_1", ts+600, body), body, ingest.ErrTimestampOutOfTolerance},
		{"missing id", "", tsS, sig(standardNew, "", ts, body), body, ingest.ErrSignatureMissing},
		{"missing signature", "msg_1", tsS, "", body, ingest.ErrSignatureMissing},
		{"only asymmetric entries", "msg_1", tsS, "v1a,abc", body, ingest.ErrSignatureMissing},
		{"bad timestamp", "msg_1", "soon", sig(standardNew, "msg_1", ts, body), body, ingest.ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ingest.VerifyStandard(tt.id, tt.ts, tt.signature, tt.body, keys, fixedNow, 5*time.Minute)
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
}

func TestVerifyTBank(t *testing.T) {
	t.Parallel()
	passwords := []redact.Secret{tbankPwdOld, tbankPwdNew}
	parse := func(b []byte) map[string]any {
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.UseNumber()
		var m map[string]any
		require.NoError(t, d.Decode(&m))
		return m
	}
	tamper := func(b []byte, k string, v any) []byte {
		m := parse(b)
		m[k] = v
		out, _ := json.Marshal(m)
		return out
	}
	good := tbankNotification(tbankPwdNew, nil)
	upper := parse(good)
	upper["Token"] = strings.ToUpper(upper["Token"].(string))
	upperB, _ := json.Marshal(upper)
	tests := []struct {
		name string
		body []byte
		want error
	}{
		{"new password", good, nil},
		{"old password during rotation", tbankNotification(tbankPwdOld, nil), nil},
		{"upper-case hex token", upperB, nil},
		{"nested data changed (not signed)", tamper(good, "Data", map[string]any{"customer_id": "other"}), nil},
		{"amount changed", tamper(good, "Amount", json.Number("1")), ingest.ErrSignatureMismatch},
		{"status changed", tamper(good, "Status", "REFUNDED"), ingest.ErrSignatureMismatch},
		{"field added", tamper(good, "Extra", "x"), ingest.ErrSignatureMismatch},
		{"unknown password", tbankNotification("guess", nil), ingest.ErrSignatureMismatch},
		{"other terminal", tbankNotification(tbankPwdNew, map[string]any{"TerminalKey": "OtherTerminal"}), ingest.ErrTerminalMismatch},
		{"no token", tamper(good, "Token", nil), ingest.ErrSignatureMalformed},
		{"token not hex", tamper(good, "Token", "zz"), ingest.ErrSignatureMalformed},
		{"token a number", tamper(good, "Token", json.Number("12")), ingest.ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ingest.VerifyTBank(parse(tt.body), tbankTerm, passwords)
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
	m := parse(good)
	delete(m, "Token")
	require.ErrorIs(t, ingest.VerifyTBank(m, tbankTerm, passwords), ingest.ErrSignatureMissing)
}
