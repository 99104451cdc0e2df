package redact

import (
	"bytes"
	"encoding/json"
	"testing"
)

func FuzzMaskPANs(f *testing.F) {
	for _, s := range []string{
		"4111111111111111", "4111 1111 1111 1111", "4111-1111-1111-1111", "paid 2026-12-02 4111 1111 1111 1111 ok",
		"378282246310005", "3782 822463 10005", "4222222222222", "40702810900000012345", "411111******1111",
		"6304000000000000000", "1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6", "4111111111111111-5555555555554444", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := MaskPANs(s)
		if len(out) != len(s) {
			t.Fatalf("length changed: %q -> %q", s, out)
		}
		for i := 0; i < len(s); i++ {
			if out[i] != s[i] && !(isDigit(s[i]) && out[i] == '*') {
				t.Fatalf("byte %d changed from %q to %q", i, s[i], out[i])
			}
		}
		if hasPAN(out) {
			t.Fatalf("MaskPANs(%q) = %q still holds a card number", s, out)
		}
		if again := MaskPANs(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
	})
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"id":"pay_2c1f","card":{"number":"4111111111111111","cvv":"123"},"token":"tok_abc"}`,
		`{"a":[ "note 5555 5555 5555 4444", 4111111111111111, 12.5, true, null ]}`,
		`{"headers":{"Authorization":"Bearer abcdefghijk"},"body":"{\"password\":\"x\",\"n\":\"[4111111111111111]\"}"}`,
		`{"url":"https://x/cb?token=abc&id=4111111111111111"}`,
		`{"4111111111111111":1}`, `"\u0034111111111111111"`, `[1e400, -0, 4111111111111111e0]`,
		`{"a":1,"a":2}`, `{`, `nul`, "\"\xff\"", `"  [\"x\"]  "`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := JSON(in)
		if !json.Valid(out) {
			t.Fatalf("JSON(%q) = %q is not valid JSON", in, out)
		}
		if string(out) == InvalidJSON {
			if json.Valid(in) {
				t.Fatalf("valid input %q gave the invalid-JSON placeholder", in)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("invalid input %q was not replaced by the placeholder: %q", in, out)
		}
		if again := JSON(out); !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decode output %q: %v", out, err)
		}
		checkNoPAN(t, v, out)
	})
}

// checkNoPAN walks a decoded JSON value and fails if any string, member name
// or number holds a card number.
func checkNoPAN(t *testing.T, v any, out []byte) {
	t.Helper()
	switch x := v.(type) {
	case string:
		if hasPAN(x) {
			t.Fatalf("output %q holds a card number in %q", out, x)
		}
	case json.Number:
		if hasPAN(string(x)) {
			t.Fatalf("output %q holds a card number in %s", out, x)
		}
	case []any:
		for _, e := range x {
			checkNoPAN(t, e, out)
		}
	case map[string]any:
		for k, e := range x {
			checkNoPAN(t, k, out)
			checkNoPAN(t, e, out)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{
		"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "Basic dXNlcjpwYXNzd29yZA==",
		"key sk_live_4eC39HqLyjWDarjtT1zdp7dc used", "https://x/cb?order=1&token=abc123&x=2",
		"token=sk_live_abcdef123!x", "Bearer abcdefgh4111111111111111", "id=4111111111111111",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if hasPAN(out) {
			t.Fatalf("String(%q) = %q still holds a card number", s, out)
		}
		if again := String(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
	})
}
