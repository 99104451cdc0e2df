package adapters_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/redact"
)

// HTTPConfig gives every adapter one set of defaults and checks: the
// adapter's defaults fill zero fields, explicit values stay, and the
// timeout, rate limit and root URL are checked under their keys.
func TestHTTPConfig(t *testing.T) {
	t.Parallel()
	def := adapters.HTTPConfig{Name: "target", Timeout: 30 * time.Second, RateLimit: adapters.RateLimit{Rate: 2, Burst: 40}}
	c := adapters.HTTPConfig{}.WithDefaults(def)
	require.Equal(t, "target", c.Name)
	require.Equal(t, 30*time.Second, c.Timeout)
	require.Equal(t, def.RateLimit, c.RateLimit)
	require.NotNil(t, c.Logger)
	require.NotNil(t, c.Clock)
	require.NoError(t, c.Validate("base_url", "https://api.example"))

	own := adapters.HTTPConfig{Name: "second", Timeout: time.Second, RateLimit: adapters.RateLimit{Rate: 5}}.WithDefaults(def)
	require.Equal(t, "second", own.Name)
	require.Equal(t, time.Second, own.Timeout)
	require.Equal(t, adapters.RateLimit{Rate: 5, Burst: 40}, own.RateLimit)

	for name, tc := range map[string]struct {
		c    adapters.HTTPConfig
		url  string
		want string
	}{
		"negative timeout": {adapters.HTTPConfig{Timeout: -1}, "https://api.example", "timeout must be positive"},
		"bad burst":        {adapters.HTTPConfig{RateLimit: adapters.RateLimit{Rate: 1, Burst: -1}}, "https://api.example", "rate_limit.burst"},
		"no scheme":        {adapters.HTTPConfig{}, "api.example", "portal_url must be an http(s) URL without credentials"},
		"credentials":      {adapters.HTTPConfig{}, "https://u:p@api.example", "portal_url must be an http(s) URL without credentials"},
	} {
		err := tc.c.WithDefaults(def).Validate("portal_url", tc.url)
		require.ErrorContains(t, err, tc.want, name)
	}
	require.Equal(t, "https://api.example", adapters.TrimBaseURL("https://api.example//", "https://default"))
	require.Equal(t, "https://default", adapters.TrimBaseURL("", "https://default/"))
	require.Equal(t, 5*time.Second, adapters.SettleTime(0, 5*time.Second))
	require.Equal(t, time.Second, adapters.SettleTime(time.Second, 5*time.Second))
	require.Zero(t, adapters.SettleTime(-1, 5*time.Second))
}

// Client.JSON sends the body as JSON with the account's authorization and
// the caller's headers on top, once; a body that does not encode is a
// never_retry validation error and nothing is sent.
func TestClientJSON(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, ctype, accept, auth, key string
		body                             map[string]any
	}
	got := make(chan seen, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, ctype: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept"),
			auth: r.Header.Get("Authorization"), key: r.Header.Get("Idempotency-Key")}
		b, _ := io.ReadAll(r.Body)
		if len(b) > 0 {
			_ = json.Unmarshal(b, &s.body) // a body that is not JSON fails the comparison below
		}
		got <- s
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	c := adapters.HTTPConfig{Timeout: 5 * time.Second}.WithDefaults(adapters.HTTPConfig{}).
		NewClient(adapters.BearerAuth(redact.Secret("tok")))

	resp, err := c.JSON(context.Background(), http.MethodPost, srv.URL, map[string]any{"a": 1},
		http.Header{"idempotency-key": {"k-1"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, seen{method: "POST", ctype: "application/json", accept: "application/json", auth: "Bearer tok",
		key: "k-1", body: map[string]any{"a": float64(1)}}, <-got)

	_, err = c.JSON(context.Background(), http.MethodGet, srv.URL, nil, http.Header{"Accept": {"application/hal+json"}})
	require.NoError(t, err)
	require.Equal(t, seen{method: "GET", accept: "application/hal+json", auth: "Bearer tok"}, <-got)

	_, err = c.JSON(context.Background(), http.MethodPost, srv.URL, map[string]any{"f": func() {}}, nil)
	e := adapters.AsError(err)
	require.Equal(t, adapters.CodeValidation, e.Code)
	require.Equal(t, adapters.NeverRetry, e.Class)
	require.Empty(t, got, "nothing was sent")

	basic := adapters.HTTPConfig{Timeout: 5 * time.Second}.NewClient(adapters.BasicAuth("user", "pw"))
	_, err = basic.JSON(context.Background(), http.MethodGet, srv.URL, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "Basic dXNlcjpwdw==", (<-got).auth)
}

// A scan by creation time starts LookupSkew before the journal first saw the
// key when the worker says so, never further back than LookupWindow.
func TestLookupScanFrom(t *testing.T) {
	t.Parallel()
	s := adapters.LookupScan{}.WithDefaults(adapters.LookupScan{LookupWindow: 48 * time.Hour, LookupSkew: 5 * time.Minute, LookupMaxPages: 10})
	require.NoError(t, s.Validate())
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	require.Equal(t, now.Add(-48*time.Hour), s.From(context.Background(), now), "the worker does not say")
	since := now.Add(-time.Hour)
	ctx := adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 2, Since: since})
	require.Equal(t, since.Add(-5*time.Minute), s.From(ctx, now))
	old := adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 2, Since: now.Add(-72 * time.Hour)})
	require.Equal(t, now.Add(-48*time.Hour), s.From(old, now), "never before the window")
	for _, bad := range []adapters.LookupScan{{LookupWindow: -1}, {LookupSkew: -1}, {LookupMaxPages: -1}} {
		require.Error(t, bad.WithDefaults(s).Validate(), "%+v", bad)
	}
}

func TestTargetValues(t *testing.T) {
	t.Parallel()
	require.Equal(t, "[op:prod:invoice.create:o-1:v1]", adapters.Marker("prod:invoice.create:o-1:v1"))
	for m, want := range map[int64]string{125000: "1250.00", 7: "0.07", 0: "0.00", -7: "-0.07", -125005: "-1250.05"} {
		require.Equal(t, want, adapters.FormatMinor(m))
	}
	require.Equal(t, "Заказ", adapters.Truncate("Заказ 17", 5))
	require.Equal(t, "short", adapters.Truncate("short", 10))
	require.Equal(t, "pi_3Ab", adapters.SafeToken("pi_3Ab", 64))
	for _, bad := range []string{"with space", `quo"te`, "apos'", "tab\t", "é", "toolongtoken"} {
		require.Empty(t, adapters.SafeToken(bad, 10), bad)
	}
	e := adapters.AsError(adapters.NoEffect(adapters.NewError("x", adapters.ReconcileBeforeRetry, nil)))
	require.Equal(t, adapters.Retry, e.Class)
	e = adapters.AsError(adapters.NoEffect(adapters.NewError("x", adapters.NeverRetry, nil)))
	require.Equal(t, adapters.NeverRetry, e.Class)
	require.NoError(t, adapters.NoEffect(nil))
}
