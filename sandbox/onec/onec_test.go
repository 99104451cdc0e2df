package onec

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHTTPServiceContract(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	_, err := s.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	call := func(method, path, key, body string, auth bool) (int, map[string]any) {
		req, err := http.NewRequest(method, s.BaseURL()+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		if auth {
			req.SetBasicAuth(s.Credentials())
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), string(b))
		return resp.StatusCode, m
	}
	inv := `{"order_id":"o1","customer_id":"c1","amount_minor":100,"currency":"RUB"}`
	code, _ := call("POST", "/hs/integration/invoices", "k1", inv, false)
	require.Equal(t, 401, code)
	code, m := call("POST", "/hs/integration/invoices", "k1", inv, true)
	require.Equal(t, 201, code)
	ref := m["ref"]
	code, m = call("POST", "/hs/integration/invoices", "k1", inv, true)
	require.Equal(t, 200, code)
	require.Equal(t, ref, m["ref"])
	require.Equal(t, true, m["replayed"])
	code, m = call("POST", "/hs/integration/invoices", "k1", `{"order_id":"o1","customer_id":"c1","amount_minor":200,"currency":"RUB"}`, true)
	require.Equal(t, 409, code)
	require.Equal(t, "idempotency_key_reused", m["error"])
	code, _ = call("POST", "/hs/integration/invoices", "k2", `{"order_id":"o1"}`, true)
	require.Equal(t, 422, code)
	code, m = call("GET", "/hs/integration/invoices/k1", "", "", true)
	require.Equal(t, 200, code)
	require.Equal(t, ref, m["ref"])
	code, m = call("GET", "/hs/integration/invoices/nope", "", "", true)
	require.Equal(t, 404, code)
	require.Equal(t, "not_found", m["error"])
	require.Equal(t, 1, s.Effects("k1"))

	// The HTTP service's document is visible over OData by its attribute.
	q := url.Values{"$format": {"json"}, "$filter": {"ВнешнийКлюч eq 'k1' and DeletionMark eq false"}}
	code, m = call("GET", "/odata/standard.odata/"+DefaultDocument+"?"+q.Encode(), "", "", true)
	require.Equal(t, 200, code)
	require.Len(t, m["value"], 1)
	code, m = call("GET", "/odata/standard.odata/Document_Nope?$format=json", "", "", true)
	require.Equal(t, 404, code)
	require.Contains(t, m, "odata.error")
}

func TestParseFilter(t *testing.T) {
	t.Parallel()
	c, err := parseFilter("ВнешнийКлюч eq 'a''b' and DeletionMark eq false and Ref_Key eq guid'6F1C3A2E-1C00-5E00-8000-00000000A1C1' and N eq 1.5")
	require.NoError(t, err)
	require.Equal(t, []cond{{"ВнешнийКлюч", "a'b", false}, {"DeletionMark", false, false}, {"Ref_Key", "6f1c3a2e-1c00-5e00-8000-00000000a1c1", false}, {"N", json.Number("1.5"), false}}, c)
	c, err = parseFilter("substringof('[op:k]', Комментарий) and DeletionMark eq false")
	require.NoError(t, err)
	require.Equal(t, []cond{{"Комментарий", "[op:k]", true}, {"DeletionMark", false, false}}, c)
	c, err = parseFilter("substringof('x', A) eq true")
	require.NoError(t, err)
	require.Equal(t, []cond{{"A", "x", true}}, c)
	require.True(t, matchAll(map[string]any{"A": "a x b"}, c))
	require.False(t, matchAll(map[string]any{"A": "a b"}, c))
	for _, bad := range []string{"x eq", "x eq 'open", "x gt 1", "x eq 1 or y eq 2", "x eq guid'zz'", "x eq 1 and ",
		"substringof(1, A)", "substringof('x' A)", "substringof('x', A"} {
		_, err := parseFilter(bad)
		require.Error(t, err, bad)
	}
}

func FuzzParseFilter(f *testing.F) {
	f.Add("a eq 'x' and b eq false")
	f.Add("a eq guid'6f1c3a2e-1c00-5e00-8000-00000000a1c1'")
	f.Add("substringof('[op:k]', b) eq true and c eq 1")
	f.Fuzz(func(t *testing.T, s string) { _, _ = parseFilter(s) })
}
