package stripe_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/sandbox/stripe"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func start(t *testing.T, opts stripe.Options) (*stripe.Server, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}
	opts.Clock = clk.Now
	s := stripe.New(opts)
	_, err := s.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

func do(t *testing.T, s *stripe.Server, method, path, key string, form url.Values) (*http.Response, map[string]any) {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, s.URL()+path, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.SecretKey())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp, out
}

func pi(amount, pm string) url.Values {
	return url.Values{"amount": {amount}, "currency": {"eur"}, "payment_method": {pm}, "confirm": {"true"},
		"off_session": {"true"}, "metadata[idemgate_key]": {"k-1"}}
}

func TestIdempotencyLayer(t *testing.T) {
	t.Parallel()
	s, clk := start(t, stripe.Options{})
	resp, first := do(t, s, "POST", "/v1/payment_intents", "key-1", pi("2000", "pm_card_visa"))
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "succeeded", first["status"])
	require.NotEmpty(t, resp.Header.Get("Request-Id"))

	resp, again := do(t, s, "POST", "/v1/payment_intents", "key-1", pi("2000", "pm_card_visa"))
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first["id"], again["id"])

	resp, e := do(t, s, "POST", "/v1/payment_intents", "key-1", pi("2500", "pm_card_visa"))
	require.Equal(t, 400, resp.StatusCode)
	require.Equal(t, "idempotency_error", e["error"].(map[string]any)["type"])
	require.Equal(t, 1, s.Effects("key-1"))

	// Validation failures are not stored: the key stays free.
	resp, _ = do(t, s, "POST", "/v1/payment_intents", "key-2", pi("-1", "pm_card_visa"))
	require.Equal(t, 400, resp.StatusCode)
	resp, _ = do(t, s, "POST", "/v1/payment_intents", "key-2", pi("100", "pm_card_visa"))
	require.Equal(t, 200, resp.StatusCode)

	clk.Add(24*time.Hour + time.Second)
	_, later := do(t, s, "POST", "/v1/payment_intents", "key-1", pi("2000", "pm_card_visa"))
	require.NotEqual(t, first["id"], later["id"], "pruned after 24h")
}

func TestDeclineIsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	s, _ := start(t, stripe.Options{})
	resp, e := do(t, s, "POST", "/v1/payment_intents", "d-1", pi("2000", "pm_card_chargeDeclinedInsufficientFunds"))
	require.Equal(t, 402, resp.StatusCode)
	er := e["error"].(map[string]any)
	require.Equal(t, "card_error", er["type"])
	require.Equal(t, "insufficient_funds", er["decline_code"])
	require.Equal(t, "requires_payment_method", er["payment_intent"].(map[string]any)["status"])
	resp, _ = do(t, s, "POST", "/v1/payment_intents", "d-1", pi("2000", "pm_card_chargeDeclinedInsufficientFunds"))
	require.Equal(t, 402, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, s.Effects("d-1"))

	resp, e = do(t, s, "POST", "/v1/payment_intents", "d-2", pi("2000", "pm_unknown"))
	require.Equal(t, 400, resp.StatusCode)
	require.Equal(t, "resource_missing", e["error"].(map[string]any)["code"])
}

func TestSearchLagAndQuery(t *testing.T) {
	t.Parallel()
	s, clk := start(t, stripe.Options{SearchLag: 30 * time.Second})
	do(t, s, "POST", "/v1/payment_intents", "s-1", pi("2000", "pm_card_visa"))
	q := url.Values{"query": {`metadata['idemgate_key']:'k-1'`}}
	_, res := do(t, s, "GET", "/v1/payment_intents/search?"+q.Encode(), "", nil)
	require.Equal(t, "search_result", res["object"])
	require.Empty(t, res["data"])
	clk.Add(30 * time.Second)
	_, res = do(t, s, "GET", "/v1/payment_intents/search?"+q.Encode(), "", nil)
	require.Len(t, res["data"], 1)

	bad := url.Values{"query": {`amount>100`}}
	resp, _ := do(t, s, "GET", "/v1/payment_intents/search?"+bad.Encode(), "", nil)
	require.Equal(t, 400, resp.StatusCode)
}

func TestRefunds(t *testing.T) {
	t.Parallel()
	s, _ := start(t, stripe.Options{})
	_, p := do(t, s, "POST", "/v1/payment_intents", "p-1", pi("1000", "pm_card_visa"))
	ref := url.Values{"payment_intent": {p["id"].(string)}, "amount": {"600"}, "metadata[idemgate_key]": {"r"}}
	resp, r := do(t, s, "POST", "/v1/refunds", "r-1", ref)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "refund", r["object"])
	resp, _ = do(t, s, "POST", "/v1/refunds", "r-2", ref)
	require.Equal(t, 400, resp.StatusCode, "only 400 left")
	_, l := do(t, s, "GET", "/v1/refunds?payment_intent="+p["id"].(string), "", nil)
	require.Equal(t, "list", l["object"])
	require.Len(t, l["data"], 1)
	require.Equal(t, 1, s.Effects("r-1"))
}

func TestAuthAndIgnoreKey(t *testing.T) {
	t.Parallel()
	s, _ := start(t, stripe.Options{})
	req, _ := http.NewRequest("GET", s.URL()+"/v1/payment_intents/pi_x", nil)
	req.Header.Set("Authorization", "Bearer sk_test_wrong")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode)

	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey}))
	_, a := do(t, s, "POST", "/v1/payment_intents", "i-1", pi("100", "pm_card_visa"))
	_, b := do(t, s, "POST", "/v1/payment_intents", "i-1", pi("100", "pm_card_visa"))
	require.NotEqual(t, a["id"], b["id"])
	require.Equal(t, 2, s.Effects("i-1"))
}
