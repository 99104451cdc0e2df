package redact

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// appendValues are values of every kind results are built of, with text
// that must be redacted in each place text can sit.
var appendValues = []any{
	nil, true, false, "", "plain", "captured", "a\"quote\\ and <html> & \u2028 \t\n\x01",
	"card 4111 1111 1111 1111 ok", "Bearer abcdefghijklmnopqrstuvwxyz012345", "sk_live_51H8abcdefghijklmnopqrstuv",
	`{"token":"x","card":"4111111111111111","n":4111111111111111}`, ` [1,"4111111111111111"] `, "{not json",
	"bad \xff utf-8 \xfe", "кириллица и 4111111111111111", 0, -17, int64(4111111111111111), int64(math.MinInt64),
	uint64(5555555555554444), uint(7), int32(-3), 1.5, 1e21, 1e-7, float64(4111111111111111),
	json.Number("4111111111111111"), json.RawMessage(`{"password":"p","x":[1,2]}`), json.RawMessage(nil),
	[]string{"a", "4111111111111111"}, []string(nil), []any{1, "two", nil, map[string]any{"pin": 1234}},
	[]any(nil), map[string]any(nil), map[string]any{},
	map[string]any{"z": 1, "a": "4111111111111111", "api_key": "k", "nested": map[string]any{"cvv": "123", "ok": []any{true}},
		"lease_token": 7, "m": map[string]any{"b": 2, "a": 1}, "card4111111111111111": "name"},
	struct {
		Token string `json:"token"`
		N     int    `json:"n"`
	}{"t", 1},
	[]byte("bytes"),
}

// TestAppendValueIsJSONOfMarshal: AppendValue writes what JSON makes of the
// encoding/json encoding, byte for byte, for every kind.
func TestAppendValueIsJSONOfMarshal(t *testing.T) {
	t.Parallel()
	for i, v := range appendValues {
		b, err := json.Marshal(v)
		require.NoError(t, err, "%d", i)
		got, err := AppendValue([]byte("prefix"), v)
		require.NoError(t, err, "%d: %#v", i, v)
		require.Equal(t, "prefix"+string(JSON(b)), string(got), "%d: %#v", i, v)

		m := map[string]any{"k" + strconv.Itoa(i): v, "secret_" + strconv.Itoa(i): v}
		b, err = json.Marshal(m)
		require.NoError(t, err)
		got, err = AppendValue(nil, m)
		require.NoError(t, err)
		require.Equal(t, string(JSON(b)), string(got), "%d in an object: %#v", i, v)
	}
}

func TestAppendMember(t *testing.T) {
	t.Parallel()
	got, err := AppendMember([]byte("{"), "password", "hunter2")
	require.NoError(t, err)
	require.Equal(t, `{"password":"[REDACTED]"`, string(got))
	got, err = AppendMember(nil, "note", "pan 4111111111111111")
	require.NoError(t, err)
	require.Equal(t, `"note":"pan 411111******1111"`, string(got))
	_, err = AppendMember(nil, "x", math.NaN())
	require.Error(t, err, "a value encoding/json refuses")
	_, err = AppendValue(nil, json.RawMessage(`{`))
	require.Error(t, err, "an invalid RawMessage")
}

func FuzzAppendValue(f *testing.F) {
	for _, v := range appendValues {
		if s, ok := v.(string); ok {
			f.Add(s, int64(0))
		}
	}
	f.Add("", int64(4111111111111111))
	f.Fuzz(func(t *testing.T, s string, n int64) {
		v := map[string]any{s: s, "n": n, "list": []string{s}, "any": []any{s, n}}
		b, err := json.Marshal(v)
		if err != nil {
			t.Skip()
		}
		got, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("AppendValue(%q, %d): %v", s, n, err)
		}
		if want := JSON(b); string(got) != string(want) {
			t.Fatalf("AppendValue(%q, %d) = %s, JSON(Marshal) = %s", s, n, got, want)
		}
	})
}
