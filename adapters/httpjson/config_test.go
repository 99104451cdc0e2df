package httpjson_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/httpjson"
	"github.com/idemgate/idemgate/adapters/httpjson/httpjsontest"
	"github.com/idemgate/idemgate/operation"
)

func validWarehouse() httpjson.Config {
	c := httpjsontest.Warehouse()
	c.Name = "warehouse"
	c.BaseURL = "https://wms.example.com"
	t, _ := registry.Lookup(httpjsontest.OpShipment)
	c.Types = []operation.Type{t}
	return c.WithDefaults()
}

func TestDeclarationRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		edit     func(*httpjson.Config)
		sentinel error
		msg      string
	}{
		{"no key placement", func(c *httpjson.Config) { c.Key.In = "" }, httpjson.ErrUnsafeConfig, "key.in is missing"},
		{"no lookup", func(c *httpjson.Config) { c.Lookup = nil }, httpjson.ErrUnsafeConfig, "lookup is missing"},
		{"no guarantee", func(c *httpjson.Config) { c.Capabilities = httpjson.CapabilitiesConfig{} }, httpjson.ErrUnsafeConfig, "native_key"},
		{"both guarantees", func(c *httpjson.Config) { c.Capabilities.LookupBeforeCreate = true }, httpjson.ErrInvalidConfig, "exclude each other"},
		{"unique id without duplicate rule", func(c *httpjson.Config) { c.Errors = nil }, httpjson.ErrUnsafeConfig, "class lookup"},
		{"free text in the URL", func(c *httpjson.Config) { c.Execute.URL = "/api/shipments/${payload.comment}" }, httpjson.ErrUnsafeConfig, "free text"},
		{"free text in a header", func(c *httpjson.Config) { c.Execute.Headers = map[string]string{"X-Note": "${payload.comment}"} }, httpjson.ErrUnsafeConfig, "free text"},
		{"unknown field", func(c *httpjson.Config) { c.Execute.Body = `{"w": "${payload.weight}"}` }, httpjson.ErrInvalidConfig, "has no field weight"},
		{"unknown reference", func(c *httpjson.Config) { c.Execute.Body = `{"w": "${secret}"}` }, httpjson.ErrInvalidConfig, "unknown reference"},
		{"body not JSON", func(c *httpjson.Config) { c.Execute.Body = `{"w": ` }, httpjson.ErrInvalidConfig, "not JSON"},
		{"lookup from payload", func(c *httpjson.Config) { c.Lookup[0].URL = "/api/shipments/${key}/${payload.order_id}" }, httpjson.ErrUnsafeConfig, "from the key alone"},
		{"lookup without key", func(c *httpjson.Config) { c.Lookup[0].URL = "/api/shipments" }, httpjson.ErrInvalidConfig, "${key}"},
		{"lookup body on GET", func(c *httpjson.Config) { c.Lookup[0].Body = `{"code": "${key}"}` }, httpjson.ErrInvalidConfig, "goes with method POST"},
		{"lookup body from payload", func(c *httpjson.Config) {
			c.Lookup[0].Method, c.Lookup[0].Body = "POST", `{"code": "${key}", "o": "${payload.order_id}"}`
		}, httpjson.ErrUnsafeConfig, "from the key alone"},
		{"lookup unproven", func(c *httpjson.Config) { c.Lookup[0].KeyPath, c.Lookup[0].MarkerPath = "", "" }, httpjson.ErrInvalidConfig, "key_path or marker_path"},
		{"inline URL credentials", func(c *httpjson.Config) { c.BaseURL = "https://u:p@wms.example.com" }, httpjson.ErrInvalidConfig, "without credentials"},
		{"auth without source", func(c *httpjson.Config) { c.Auth.SecretEnv = "" }, httpjson.ErrInvalidConfig, "secret_env or secret_file"},
		{"retry on 2xx", func(c *httpjson.Config) {
			c.Errors = append(c.Errors, httpjson.ErrorRule{Status: []int{200}, Class: "retry"})
		}, httpjson.ErrInvalidConfig, "cannot be retry"},
		{"bad class", func(c *httpjson.Config) { c.Errors[0].Class = "maybe" }, httpjson.ErrInvalidConfig, "class"},
		{"decimal on text", func(c *httpjson.Config) { c.Execute.Body = `{"w": "${payload.order_id|decimal}"}` }, httpjson.ErrInvalidConfig, "|decimal"},
	}
	for _, c := range cases {
		cfg := validWarehouse()
		cfg.Lookup = append([]httpjson.LookupRequest(nil), cfg.Lookup...)
		cfg.Errors = append([]httpjson.ErrorRule(nil), cfg.Errors...)
		c.edit(&cfg)
		err := cfg.Validate()
		require.ErrorIs(t, err, c.sentinel, c.name)
		require.ErrorContains(t, err, c.msg, c.name)
		require.ErrorContains(t, err, "adapters.http.warehouse", c.name)
	}
	require.NoError(t, validWarehouse().Validate())
}

// TestCredentialNeverInline: the secret comes from a file or the
// environment; a missing one names the source, not a value.
func TestCredential(t *testing.T) {
	t.Parallel()
	cfg := validWarehouse()
	cfg.Getenv = func(string) string { return "" }
	_, err := httpjson.New(cfg)
	require.ErrorIs(t, err, adapters.ErrNoCredential)
	require.ErrorContains(t, err, httpjsontest.TokenEnv)

	dir := t.TempDir()
	path := dir + "/token"
	require.NoError(t, writeFile(path, "file-token-123\n"))
	cfg.Auth.SecretEnv, cfg.Auth.SecretFile = "", path
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"s1","externalCode":"` + r.Header.Get("X-None") + `"}`))
	}))
	defer srv.Close()
	cfg.BaseURL = srv.URL
	a, err := httpjson.New(cfg)
	require.NoError(t, err)
	_, err = a.Execute(t.Context(), shipmentOp(adaptertestIntent("cred"), 0))
	require.NoError(t, err)
	require.Equal(t, "Bearer file-token-123", got)
}

// TestRequestShape: the body template renders typed values, leaves out
// absent optional fields, puts the key where declared and the free text
// only in the body.
func TestRequestShape(t *testing.T) {
	t.Parallel()
	var body map[string]any
	var header http.Header
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header, query = r.Header.Clone(), r.URL.RawQuery
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"s1","state":"accepted","externalCode":"x"}`))
	}))
	defer srv.Close()
	cfg := validWarehouse()
	cfg.BaseURL = srv.URL
	cfg.Getenv = func(string) string { return "tok" }
	cfg.Execute.Body = `{"name": "${payload.order_id}", "quantity": "${payload.quantity}", "value": "${payload.declared_value|decimal}", "cur": "${payload.currency}", "missing": "${payload.comment}", "label": "order ${payload.order_id} x${payload.quantity}", "lines": [{"q": "${payload.quantity}"}]}`
	cfg.Execute.Headers = map[string]string{"X-Order": "${payload.order_id}"}
	a, err := httpjson.New(cfg)
	require.NoError(t, err)
	op := decode(`{"order_id":"SO-7","quantity":2,"declared_value":125050,"currency":"eur"}`, adaptertestIntent("shape"))
	out, err := a.Execute(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, "s1", out.ObjectID)
	require.Equal(t, "accepted", out.BusinessStatus)
	require.Equal(t, false, out.Details["key_stored"], "the answer echoed another key")
	require.Equal(t, map[string]any{
		"name": "SO-7", "quantity": float64(2), "value": "1250.50", "cur": "EUR",
		"label": "order SO-7 x2", "lines": []any{map[string]any{"q": float64(2)}},
		"externalCode": op.Key.String(),
	}, body)
	require.Equal(t, "SO-7", header.Get("X-Order"))
	require.Empty(t, query)
}

func TestRetryAfterAndRules(t *testing.T) {
	t.Parallel()
	status, answer := http.StatusTooManyRequests, `{"error":"slow down"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	cfg := validWarehouse()
	cfg.BaseURL = srv.URL
	cfg.Getenv = func(string) string { return "tok" }
	cfg.Errors = append(cfg.Errors,
		httpjson.ErrorRule{Status: []int{422}, BodyPath: "error", Equals: "insufficient_stock", Class: "never_retry", Code: "insufficient_stock"},
		httpjson.ErrorRule{Status: []int{409}, Contains: "locked", Class: "retry", Code: "document_locked"},
	)
	a, err := httpjson.New(cfg)
	require.NoError(t, err)
	op := shipmentOp(adaptertestIntent("rules"), 0)
	_, err = a.Execute(t.Context(), op)
	e := requireClass(t, err, adapters.Retry, adapters.CodeHTTP429)
	require.Equal(t, 7*time.Second, e.RetryAfter)

	status, answer = 422, `{"error":"insufficient_stock"}`
	_, err = a.Execute(t.Context(), op)
	requireClass(t, err, adapters.NeverRetry, "insufficient_stock")

	status, answer = 409, `{"error":"document locked by user"}`
	_, err = a.Execute(t.Context(), op)
	e = requireClass(t, err, adapters.Retry, "document_locked")
	require.Equal(t, 7*time.Second, e.RetryAfter)
	require.NotContains(t, err.Error(), "locked by user", "no body text in errors")
}

func requireClass(t *testing.T, err error, class adapters.Class, code string) *adapters.Error {
	t.Helper()
	var e *adapters.Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, class, e.Class)
	require.Equal(t, code, e.Code)
	return e
}

func adaptertestIntent(p string) string { return adaptertest.Intent(p) }

// TestPostSearchLookup: a search whose filter travels in a POST body.
func TestPostSearchLookup(t *testing.T) {
	t.Parallel()
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, http.MethodPost, r.Method)
		require.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		_, _ = w.Write([]byte(`{"result":[{"ID":"7","code":"` + got["filter"].(map[string]any)["code"].(string) + `"}]}`))
	}))
	defer srv.Close()
	cfg := validWarehouse()
	cfg.BaseURL = srv.URL
	cfg.Getenv = func(string) string { return "tok" }
	cfg.Execute.ObjectID = "ID"
	cfg.Lookup = []httpjson.LookupRequest{{Mode: httpjson.LookupSearch, Method: "POST", URL: "/api/list", Body: `{"filter": {"code": "${key}"}, "limit": 10}`, Items: "result", KeyPath: "code"}}
	a, err := httpjson.New(cfg)
	require.NoError(t, err)
	op := shipmentOp(adaptertestIntent("post"), 0)
	lr, err := a.Lookup(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, "7", lr.Outcome.ObjectID)
	require.Equal(t, map[string]any{"filter": map[string]any{"code": op.Key.String()}, "limit": float64(10)}, got)
}

// TestRateLimit: the declared rate_limit holds requests to the account's
// pace; a wait that cannot fit the call is retry with nothing sent.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"s1"}`))
	}))
	defer srv.Close()
	cfg := validWarehouse()
	cfg.BaseURL = srv.URL
	cfg.Getenv = func(string) string { return "tok" }
	cfg.RateLimit = adapters.RateLimit{Rate: 0.5, Burst: 1}
	a, err := httpjson.New(cfg)
	require.NoError(t, err)
	_, err = a.Execute(t.Context(), shipmentOp(adaptertestIntent("rate"), 0))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = a.Execute(ctx, shipmentOp(adaptertestIntent("rate"), 0))
	requireClass(t, err, adapters.Retry, adapters.CodeClientRateLimit)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, sent, "the second request was not sent")
}
