package operation

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"
)

func TestFingerprintVector(t *testing.T) {
	t.Parallel()
	fields := map[string]any{
		"account_id":   "merchant-account-17",
		"order_id":     "order-48291",
		"amount_minor": int64(125000),
		"currency":     "RUB",
	}
	form, err := canonicalForm("payment.charge", fields)
	require.NoError(t, err)
	require.Equal(t, `{"account_id":"merchant-account-17","amount_minor":125000,"currency":"RUB","operation":"payment.charge","order_id":"order-48291"}`, string(form))
	fp, err := fingerprint("payment.charge", fields)
	require.NoError(t, err)
	require.Equal(t, vectorFingerprint, fp)

	// The same text through the general canonicalizer and the oracle.
	again, err := canonicalize([]byte(`{ "operation": "payment.charge", "account_id": "merchant-account-17",
		"order_id": "order-48291", "amount_minor": 125000, "currency": "RUB" }`))
	require.NoError(t, err)
	require.Equal(t, string(form), string(again))
	oracle, err := jcs.Transform(again)
	require.NoError(t, err)
	require.Equal(t, string(form), string(oracle))
}

func TestCanonicalFormValues(t *testing.T) {
	t.Parallel()
	form, err := canonicalForm("x.y", map[string]any{
		"s": "a\"b\\c\n\u0001€", "b": true, "f": false, "i": 42, "i64": int64(-7), "u": uint64(9),
		"t": time.Date(2026, 12, 2, 13, 0, 0, 120_000_000, time.FixedZone("MSK", 3*3600)),
		"€": "euro", "\r": "cr",
	})
	require.NoError(t, err)
	require.Equal(t, `{"\r":"cr","b":true,"f":false,"i":42,"i64":-7,"operation":"x.y","s":"a\"b\\c\n\u0001€","t":"2026-12-02T10:00:00.12Z","u":9,"€":"euro"}`, string(form))
	canon, err := canonicalize(form)
	require.NoError(t, err)
	require.Equal(t, string(form), string(canon), "canonicalForm's output is canonical")

	for name, fields := range map[string]map[string]any{
		"operation field":   {"operation": "x"},
		"float":             {"a": 1.5},
		"nested non-field":  {"a": map[string]any{"B": "x"}},
		"nested float":      {"a": map[string]any{"b": 1.5}},
		"nil":               {"a": nil},
		"2^53":              {"a": int64(1 << 53)},
		"-2^53":             {"a": int64(-(1 << 53))},
		"huge uint":         {"a": uint64(math.MaxUint64)},
		"invalid UTF-8":     {"a": "\xff"},
		"invalid UTF-8 key": {"\xff": "a"},
	} {
		_, err := canonicalForm("x.y", fields)
		require.Error(t, err, name)
	}
	_, err = canonicalForm("", nil)
	require.Error(t, err)
	// An object field's members are written in order, recursively.
	obj, err := canonicalForm("x.y", map[string]any{"a": map[string]any{"z": int64(1), "b": map[string]any{"c": "d"}}})
	require.NoError(t, err)
	require.Equal(t, `{"a":{"b":{"c":"d"},"z":1},"operation":"x.y"}`, string(obj))
	_, err = fingerprint("x.y", map[string]any{"a": 1.5})
	require.Error(t, err)
}

func TestCanonicalizeRFC8785(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		// RFC 8785 section 3.2.2.
		{
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		// RFC 8785 section 3.2.3: sorting on UTF-16 code units.
		{
			in:   `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{in: ` true `, want: `true`},
		{in: `"\u2028<>&\u007f"`, want: "\"\u2028<>&\u007f\""},
		{in: `[]`, want: `[]`},
		{in: `{}`, want: `{}`},
		{in: `[{"b":[],"a":{"d":1,"c":2}}]`, want: `[{"a":{"c":2,"d":1},"b":[]}]`},
		{in: `-0`, want: `0`},
		{in: `-0.0e5`, want: `0`},
		{in: `1e21`, want: `1e+21`},
		{in: `1E-7`, want: `1e-7`},
		{in: `123456789012345678901234`, want: `1.2345678901234569e+23`},
		{in: `9007199254740993`, want: `9007199254740992`},
		{in: `0.1`, want: `0.1`},
		{in: `100`, want: `100`},
		{in: `1e-400`, want: `0`},
	}
	for _, tt := range tests {
		got, err := canonicalize([]byte(tt.in))
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, string(got), tt.in)
		oracle, err := jcs.Transform([]byte(tt.in))
		require.NoError(t, err, tt.in)
		require.Equal(t, string(oracle), string(got), tt.in)
	}
}

// TestFormatES6 uses RFC 8785 Appendix B's IEEE-754 test values.
func TestFormatES6(t *testing.T) {
	t.Parallel()
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		got, err := formatES6(math.Float64frombits(tt.bits))
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "%016x", tt.bits)
	}
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		_, err := formatES6(math.Float64frombits(bits))
		require.Error(t, err)
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	t.Parallel()
	bad := []string{
		``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":1 "b":2}`, `{a:1}`, `'a'`,
		`01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `-`, `--1`, `0x10`, `NaN`, `Infinity`, `1_000`,
		`tru`, `nul`, `[true false]`, `"abc`, `"\x"`, `"\u12"`, `"\u12G4"`,
		`{"a":1,"a":2}`, `{"a":1,"b":{"c":1,"c":1}}`, `{"\u0061":1,"a":2}`,
		`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800x"`,
		"\"\xff\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\"", "\"a\x01b\"", "\xef\xbb\xbf{}",
		`1e400`, `-1e400`, `[1] [2]`, `{} x`,
		strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
	}
	for _, in := range bad {
		_, err := canonicalize([]byte(in))
		require.Error(t, err, "%q", in)
		require.ErrorIs(t, err, ErrNotJSON, "%q", in)
		_, oerr := jcs.Transform([]byte(in))
		require.Error(t, oerr, "oracle accepts %q", in)
	}
	_, err := canonicalize(nil)
	require.ErrorIs(t, err, ErrNotJSON)

	deep := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	_, err = canonicalize([]byte(deep))
	require.NoError(t, err)
}

func TestSyntaxErrorNeverQuotesInput(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{"4111111111111111":1,"4111111111111111":2}`, `[4111111111111111x]`, `{"a":"4111111111111111`} {
		_, err := canonicalize([]byte(in))
		require.Error(t, err)
		require.NotContains(t, err.Error(), "4111111111111111")
	}
}

// FuzzCanonicalize checks the reference canonicalizer against gowebpki/jcs: the same
// output or both an error, and canonical output is a fixed point.
func FuzzCanonicalize(f *testing.F) {
	seeds := []string{
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"x","1":"One","\ud83d\ude00":"Emoji","\u0080":"Control","\u00f6":"o"}`,
		`{"account_id":"merchant-account-17","amount_minor":125000,"currency":"RUB","operation":"payment.charge","order_id":"order-48291"}`,
		`[1e21,1e-7,-0,9007199254740993,0.1,5e-324,1.7976931348623157e308]`,
		`{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `1e400`, ` [ ] `, `{"a":[{"b":null}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, bits := range []uint64{0x44b52d02c7e14af6, 0x3eb0c6f7a0b5ed8c, 0x41b3de4355555557} {
		s, _ := formatES6(math.Float64frombits(bits))
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := canonicalize(in)
		want, oerr := jcs.Transform(in)
		if (err == nil) != (oerr == nil) {
			t.Fatalf("canonicalize(%q): err=%v, jcs err=%v", in, err, oerr)
		}
		if err != nil {
			return
		}
		if string(got) != string(want) {
			t.Fatalf("canonicalize(%q) = %q, jcs = %q", in, got, want)
		}
		again, err := canonicalize(got)
		if err != nil || string(again) != string(got) {
			t.Fatalf("not idempotent: %q -> %q (%v)", got, again, err)
		}
	})
}
