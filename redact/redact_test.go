package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMaskPANs(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"4111111111111111", "411111******1111"},
		{"card 4111111111111111 charged", "card 411111******1111 charged"},
		{"4111 1111 1111 1111", "4111 11** **** 1111"},
		{"4111-1111-1111-1111", "4111-11**-****-1111"},
		{"378282246310005", "378282*****0005"},                                               // Amex, 15
		{"3782 822463 10005", "3782 82**** *0005"},                                           // Amex layout
		{"4222222222222", "422222***2222"},                                                   // 13 digits
		{"6011000990139424", "601100******9424"},                                             // Discover
		{"4000056655665556", "400005******5556"},                                             // Visa debit
		{"paid 2026-12-02 4111 1111 1111 1111 ok", "paid 2026-12-02 4111 11** **** 1111 ok"}, // a date is not part of a card
		{"4111.1111.1111.1111", "4111.11**.****.1111"},
		{"4111_1111_1111_1111 2026", "4111_11**_****_1111 2026"},
		{"6304 0000 0000 0000 000", "6304 00** **** ***0 000"}, // 4-4-4-4-3
		{"4111111111111111-5555555555554444", "411111******1111-555555******4444"},
		{"x4111111111111111y", "x411111******1111y"},
		{`{"n":"5555555555554444"}`, `{"n":"555555******4444"}`},
		{"4111111111111111,5555555555554444", "411111******1111,555555******4444"},
		{"6759649826438453", "675964******8453"},       // Maestro, 16
		{"6304000000000000000", "630400*********0000"}, // Maestro, 19
		// Not card numbers.
		{"4111111111111112", "4111111111111112"},         // Luhn fails
		{"411111111111", "411111111111"},                 // 12 digits
		{"40702810900000012345", "40702810900000012345"}, // 20-digit account number
		{"4111  1111 1111 1111", "4111  1111 1111 1111"}, // double space splits the run
		{"4111 111111111111", "4111 111111111111"},       // not a card layout
		{"2026-12-02-000125", "2026-12-02-000125"},       // 14 digits passing Luhn, but a date
		{"5555555555554444 0", "555555******4444 0"},
		{"2026-12-02T10:00:00Z", "2026-12-02T10:00:00Z"},           // timestamp
		{"+7 495 123-45-67", "+7 495 123-45-67"},                   // phone
		{"order-48291 amount 125000", "order-48291 amount 125000"}, // short numbers
		{"", ""},
		{"411111******1111", "411111******1111"}, // already masked
	}
	for _, tt := range tests {
		got := MaskPANs(tt.in)
		require.Equal(t, tt.want, got, tt.in)
		require.Equal(t, got, MaskPANs(got), "idempotent: %q", tt.in)
		require.Len(t, got, len(tt.in))
		require.False(t, hasPAN(got), "%q", got)
	}
}

// hasPAN is an independent, brute-force statement of the card rule: some
// digit group (a maximal run of digits) of 13–19 digits passes Luhn, or some
// sequence of consecutive groups joined by single separators (' ', '-', '.',
// '_', '~'), printed in a card layout, holds 13–19 digits passing Luhn —
// outside UUIDs (withoutUUIDs).
func hasPAN(s string) bool {
	s = withoutUUIDs(s)
	var groups []string
	layouts := [][]int{{4, 6, 4}, {4, 6, 5}}
	for last := 1; last <= 4; last++ {
		layouts = append(layouts, []int{4, 4, 4, last})
		if last <= 3 {
			layouts = append(layouts, []int{4, 4, 4, 4, last})
		}
	}
	isLayout := func(gs []string) bool {
		if len(gs) == 1 {
			return true
		}
	next:
		for _, l := range layouts {
			if len(l) != len(gs) {
				continue
			}
			for k := range l {
				if len(gs[k]) != l[k] {
					continue next
				}
			}
			return true
		}
		return false
	}
	flush := func() bool {
		for a := range groups {
			for e := a; e < len(groups); e++ {
				d := strings.Join(groups[a:e+1], "")
				if len(d) >= 13 && len(d) <= 19 && isLayout(groups[a:e+1]) && luhn(d) {
					return true
				}
			}
		}
		groups = groups[:0]
		return false
	}
	cur := ""
	for i := 0; i <= len(s); i++ {
		if i < len(s) && isDigit(s[i]) {
			cur += s[i : i+1]
			continue
		}
		if cur != "" {
			groups = append(groups, cur)
			cur = ""
		}
		if i < len(s) && strings.IndexByte(" -._~", s[i]) >= 0 && i > 0 && isDigit(s[i-1]) && i+1 < len(s) && isDigit(s[i+1]) {
			continue
		}
		if flush() {
			return true
		}
	}
	return false
}

var (
	uuidDashed = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	uuidPlain  = regexp.MustCompile(`^[0-9a-fA-F]{12}[1-8][0-9a-fA-F]{3}[89abAB][0-9a-fA-F]{15}$`)
)

// withoutUUIDs replaces each UUID token of s — 8-4-4-4-12 hex digits, or 32
// with a version and a variant, with no letter or digit glued to either
// end — by as many 'u's, for the oracle: a UUID's digits are never a card.
func withoutUUIDs(s string) string {
	alnum := func(i int) bool {
		return i >= 0 && i < len(s) && (isDigit(s[i]) || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z')
	}
	b := []byte(s)
	for i := 0; i < len(s); i++ {
		if alnum(i - 1) {
			continue
		}
		for _, n := range []int{36, 32} {
			if i+n <= len(s) && !alnum(i+n) && (n == 36 && uuidDashed.MatchString(s[i:i+n]) || n == 32 && uuidPlain.MatchString(s[i:i+n])) {
				for k := i; k < i+n; k++ {
					b[k] = 'u'
				}
				i += n - 1
				break
			}
		}
	}
	return string(b)
}

func TestIsSecretKey(t *testing.T) {
	t.Parallel()
	secret := []string{
		"token", "access_token", "refresh-token", "X-Auth-Token", "idToken", "secret", "client_secret",
		"password", "Password", "db_passwd", "passphrase", "Authorization", "proxy-authorization",
		"api_key", "apiKey", "X-API-Key", "apikey", "aws_access_key_id", "private_key", "privateKey",
		"credentials", "credential", "Cookie", "Set-Cookie", "cvv", "cvv2", "CVC", "pan", "Pan", "cardPAN",
		"card_number", "cardNumber", "card", "CardId", "pin", "PIN", "auth", "otp", "Stripe-Signature", "pwd",
	}
	for _, k := range secret {
		require.True(t, IsSecretKey(k), k)
	}
	public := []string{
		"", "operation_key", "event_id", "amount_minor", "currency", "company", "expand", "panel",
		"author", "status", "target_object_id", "order_id", "account_id", "spinner", "keyword", "msg",
		"level", "time", "idempotency_key", "business_status", "attempt",
	}
	for _, k := range public {
		require.False(t, IsSecretKey(k), k)
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "Authorization: Bearer [REDACTED]"},
		{"bearer abcdefgh12345", "bearer [REDACTED]"},
		{"Basic dXNlcjpwYXNzd29yZA==", "Basic [REDACTED]"},
		{"basic settings changed", "basic settings changed"},
		{"key sk_live_4eC39HqLyjWDarjtT1zdp7dc used", "key [REDACTED] used"},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "[REDACTED]"},
		{"https://x/cb?order=1&token=abc123&x=2", "https://x/cb?order=1&token=[REDACTED]&x=2"},
		{"password=hunter2 user=bob", "password=[REDACTED] user=bob"},
		{"card=4111111111111111", "card=[REDACTED]"},
		{"id=4111111111111111", "id=411111******1111"},
		{"declined: card 4111 1111 1111 1111", "declined: card 4111 11** **** 1111"},
		{"nothing to see", "nothing to see"},
	}
	for _, tt := range tests {
		got := String(tt.in)
		require.Equal(t, tt.want, got, tt.in)
		require.Equal(t, got, String(got), "idempotent: %q", tt.in)
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{
			in:   `{"id":"pay_2c1f","status":"succeeded","card":{"number":"4111111111111111","cvv":"123"},"token":"tok_abc"}`,
			want: `{"id":"pay_2c1f","status":"succeeded","card":"[REDACTED]","token":"[REDACTED]"}`,
		},
		{
			in:   `{"Pan":"430000******0777","ExpDate":"1130","Token":"…","Amount":19200,"RebillId":145919}`,
			want: `{"Pan":"[REDACTED]","ExpDate":"1130","Token":"[REDACTED]","Amount":19200,"RebillId":145919}`,
		},
		{
			in:   `{"z":1, "a": [ "note 5555 5555 5555 4444", 4111111111111111, 12.5, true, null ], "m": "<&>"}`,
			want: `{"z":1,"a":["note 5555 55** **** 4444","411111******1111",12.5,true,null],"m":"<&>"}`,
		},
		{
			in:   `{"headers":{"Authorization":"Bearer abcdefghijk","Accept":"*/*"},"body":"{\"password\":\"x\",\"ok\":1}"}`,
			want: `{"headers":{"Authorization":"[REDACTED]","Accept":"*/*"},"body":"{\"password\":\"[REDACTED]\",\"ok\":1}"}`,
		},
		{in: `{"a":1,"a":2}`, want: `{"a":1,"a":2}`},
		{in: ` "just 4111111111111111" `, want: `"just 411111******1111"`},
		{in: `[]`, want: `[]`},
		{in: `{"secret":{"deep":[1,{"x":2}]},"after":"ok"}`, want: `{"secret":"[REDACTED]","after":"ok"}`},
		{in: `{"4111111111111111":"key is a card"}`, want: `{"411111******1111":"key is a card"}`},
		{in: `{"note":"[REDACTED]"}`, want: `{"note":"[REDACTED]"}`},
	}
	for _, tt := range tests {
		got := JSON([]byte(tt.in))
		require.Equal(t, tt.want, string(got), tt.in)
		require.Equal(t, string(got), string(JSON(got)), "idempotent: %s", tt.in)
		require.True(t, json.Valid(got))
	}
	for _, bad := range []string{``, `{`, `{"token":"sk_live_abc"`, `{"a":1}{"b":2}`, `4111111111111111 x`, `nul`, `{'a':1}`} {
		got := JSON([]byte(bad))
		require.Equal(t, InvalidJSON, string(got), bad)
		require.True(t, json.Valid(got))
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"password": "x",
		"nested":   []any{map[string]any{"api_key": 1, "n": json.Number("4111111111111111")}, 4111111111111111.0, "ok"},
		"n":        json.Number("12"),
		"b":        true,
		"nil":      nil,
	}
	got := Value(in)
	require.Equal(t, map[string]any{
		"password": Placeholder,
		"nested":   []any{map[string]any{"api_key": Placeholder, "n": "411111******1111"}, "411111******1111", "ok"},
		"n":        json.Number("12"),
		"b":        true,
		"nil":      nil,
	}, got)
	require.Equal(t, "x", in["password"], "the input is not modified")

	type card struct {
		Number string `json:"number"`
		Holder string `json:"holder"`
		CVV    string `json:"cvv"`
	}
	require.Equal(t, json.RawMessage(`{"number":"411111******1111","holder":"A B","cvv":"[REDACTED]"}`),
		Value(card{Number: "4111111111111111", Holder: "A B", CVV: "123"}))
	require.Equal(t, json.RawMessage(InvalidJSON), Value(make(chan int)))
}

func TestSecret(t *testing.T) {
	t.Parallel()
	s := Secret("sk_live_4eC39HqLyjWDarjtT1zdp7dc")
	require.Equal(t, "sk_live_4eC39HqLyjWDarjtT1zdp7dc", s.Reveal())
	for _, out := range []string{
		s.String(), fmt.Sprint(s), fmt.Sprintf("%v %s %q %x %d %#v %+v", s, s, s, s, s, s, s),
		fmt.Sprintf("%v", struct{ K Secret }{s}), fmt.Sprintf("%+v", &struct{ K Secret }{s}),
	} {
		require.NotContains(t, out, "4eC39")
		require.Contains(t, out, Placeholder)
	}
	b, err := json.Marshal(map[string]any{"k": s, "p": &s})
	require.NoError(t, err)
	require.Equal(t, `{"k":"[REDACTED]","p":"[REDACTED]"}`, string(b))
	txt, err := s.MarshalText()
	require.NoError(t, err)
	require.Equal(t, Placeholder, string(txt))

	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", "key", s, "any", any(s))
	require.NotContains(t, buf.String(), "4eC39")
	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, nil)).Info("m", "key", s)
	require.NotContains(t, buf.String(), "4eC39")
}

func TestReplaceAttr(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(NewHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	type resp struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	log.Info("charge declined for 4111111111111111",
		"operation_key", "prod:payment.charge:approval-6f3c2a:v1",
		"authorization", "Bearer abcdefghijkl",
		"note", "card 5555-5555-5555-4444",
		"count", 4111111111111111,
		"amount_minor", 125000,
		"err", errors.New("provider said: token=abc123 pan 4111111111111111"),
		"body", json.RawMessage(`{"password":"p","id":"x"}`),
		"raw", []byte(`{"cvv":"123"}`),
		"text", []byte("card 4111111111111111"),
		"resp", resp{ID: "pay_1", Token: "tok_1"},
		"m", map[string]any{"secret": "s", "n": 1},
		slog.Group("credentials", "user", "bob", "pass", "x"),
		slog.Group("req", "api_key", "k", "path", "/v1/charges"),
	)
	out := buf.String()
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, "charge declined for 411111******1111", got["msg"])
	require.Equal(t, "prod:payment.charge:approval-6f3c2a:v1", got["operation_key"])
	require.Equal(t, Placeholder, got["authorization"])
	require.Equal(t, "card 5555-55**-****-4444", got["note"])
	require.Equal(t, "411111******1111", got["count"])
	require.Equal(t, 125000.0, got["amount_minor"])
	require.Equal(t, "provider said: token=[REDACTED] pan 411111******1111", got["err"])
	require.Equal(t, map[string]any{"password": Placeholder, "id": "x"}, got["body"])
	require.Equal(t, map[string]any{"cvv": Placeholder}, got["raw"])
	require.Equal(t, "card 411111******1111", got["text"])
	require.Equal(t, map[string]any{"id": "pay_1", "token": Placeholder}, got["resp"])
	require.Equal(t, map[string]any{"secret": Placeholder, "n": 1.0}, got["m"])
	require.Equal(t, map[string]any{"user": Placeholder, "pass": Placeholder}, got["credentials"])
	require.Equal(t, map[string]any{"api_key": Placeholder, "path": "/v1/charges"}, got["req"])
	require.NotContains(t, got, "time")
	require.Equal(t, "INFO", got["level"])
	for _, leak := range []string{"4111111111111111", "abcdefghijkl", "tok_1", "abc123", `"p"`, "123"} {
		require.NotContains(t, out, leak)
	}

	// Text handler with ReplaceAttr directly.
	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr})).
		Info("x", "body", json.RawMessage(`{"token":"t0k"}`), "pan", "4111111111111111")
	require.NotContains(t, buf.String(), "t0k")
	require.NotContains(t, buf.String(), "4111111111111111")

	// nil options.
	buf.Reset()
	slog.New(NewHandler(&buf, nil)).Info("ok", "cookie", "c")
	require.Contains(t, buf.String(), `"cookie":"[REDACTED]"`)
	require.True(t, strings.HasPrefix(buf.String(), `{"time":`))
}

func TestFencingTokenIsNotASecret(t *testing.T) {
	require.False(t, IsSecretKey("lease_token"))
	require.False(t, IsSecretKey("LEASE_TOKEN"))
	require.True(t, IsSecretKey("access_token"))
	require.True(t, IsSecretKey("lease_token_secret"))
}
