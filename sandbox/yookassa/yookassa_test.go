package yookassa_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/sandbox/yookassa"
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

func start(t *testing.T, opts yookassa.Options) (*yookassa.Server, string, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2025, 1, 15, 14, 26, 0, 0, time.UTC)}
	opts.Clock = clk.Now
	s := yookassa.New(opts)
	base, err := s.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, base, clk
}

func do(t *testing.T, s *yookassa.Server, method, u, key string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	require.NoError(t, err)
	shop, secret := s.Credentials()
	req.SetBasicAuth(shop, secret)
	if key != "" {
		req.Header.Set("Idempotence-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func pay(value string) map[string]any {
	return map[string]any{"amount": map[string]string{"value": value, "currency": "RUB"}, "capture": true,
		"payment_method_id": "pm-1", "metadata": map[string]string{"idemgate_key": "k"}}
}

func TestIdempotenceKey(t *testing.T) {
	t.Parallel()
	s, base, clk := start(t, yookassa.Options{})
	st, first := do(t, s, "POST", base+"/v3/payments", "key-1", pay("100.00"))
	require.Equal(t, 200, st)
	require.Equal(t, "succeeded", first["status"])

	st, again := do(t, s, "POST", base+"/v3/payments", "key-1", pay("100.00"))
	require.Equal(t, 200, st)
	require.Equal(t, first["id"], again["id"])
	require.Equal(t, 1, s.Effects("key-1"))

	st, e := do(t, s, "POST", base+"/v3/payments", "key-1", pay("200.00"))
	require.Equal(t, 400, st)
	require.Equal(t, "invalid_request", e["code"])
	require.Equal(t, "Idempotence-Key", e["parameter"])
	require.Equal(t, 1, s.Effects("key-1"))

	// After 24 hours the key is forgotten: a new payment.
	clk.Add(24*time.Hour + time.Second)
	st, later := do(t, s, "POST", base+"/v3/payments", "key-1", pay("100.00"))
	require.Equal(t, 200, st)
	require.NotEqual(t, first["id"], later["id"])
	require.Equal(t, 2, s.Effects("key-1"))
}

func TestRequestChecks(t *testing.T) {
	t.Parallel()
	s, base, _ := start(t, yookassa.Options{})
	st, e := do(t, s, "POST", base+"/v3/payments", "", pay("1.00"))
	require.Equal(t, 400, st)
	require.Equal(t, "Idempotence-Key", e["parameter"])

	long := string(bytes.Repeat([]byte("k"), 65))
	st, _ = do(t, s, "POST", base+"/v3/payments", long, pay("1.00"))
	require.Equal(t, 400, st)

	bad := pay("1.00")
	bad["amount"] = map[string]string{"value": "1.00", "currency": "XTS"}
	st, e = do(t, s, "POST", base+"/v3/payments", "k2", bad)
	require.Equal(t, 400, st)
	require.Equal(t, "amount.currency", e["parameter"])

	req, _ := http.NewRequest("GET", base+"/v3/payments", nil)
	req.SetBasicAuth("100500", "wrong")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode)
	require.Equal(t, 0, s.TotalEffects())
}

func TestIgnoreKeyConnector(t *testing.T) {
	t.Parallel()
	s, base, _ := start(t, yookassa.Options{})
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey}))
	_, a := do(t, s, "POST", base+"/v3/payments", "key-x", pay("1.00"))
	_, b := do(t, s, "POST", base+"/v3/payments", "key-x", pay("1.00"))
	require.NotEqual(t, a["id"], b["id"])
	require.Equal(t, 2, s.Effects("key-x"))
}

func TestListAndRefunds(t *testing.T) {
	t.Parallel()
	s, base, clk := start(t, yookassa.Options{})
	var ids []any
	for i := range 3 {
		_, p := do(t, s, "POST", base+"/v3/payments", "p"+string(rune('a'+i)), pay("10.00"))
		ids = append(ids, p["id"])
		clk.Add(time.Minute)
	}
	q := url.Values{"limit": {"2"}, "created_at.gte": {"2025-01-15T14:26:30.000Z"}}
	st, l := do(t, s, "GET", base+"/v3/payments?"+q.Encode(), "", nil)
	require.Equal(t, 200, st)
	require.Equal(t, "list", l["type"])
	items := l["items"].([]any)
	require.Len(t, items, 2)
	require.Equal(t, ids[2], items[0].(map[string]any)["id"], "newest first")
	require.Nil(t, l["next_cursor"])

	refund := map[string]any{"payment_id": ids[0], "amount": map[string]string{"value": "6.00", "currency": "RUB"}}
	st, r := do(t, s, "POST", base+"/v3/refunds", "r1", refund)
	require.Equal(t, 200, st)
	require.Equal(t, "succeeded", r["status"])
	st, _ = do(t, s, "POST", base+"/v3/refunds", "r2", refund)
	require.Equal(t, 400, st, "only 4.00 left")
	st, l = do(t, s, "GET", base+"/v3/refunds?payment_id="+ids[0].(string), "", nil)
	require.Equal(t, 200, st)
	require.Len(t, l["items"].([]any), 1)
	require.Equal(t, 1, s.Effects("r1"))
	require.Equal(t, 0, s.Effects("r2"))

	st, _ = do(t, s, "GET", base+"/v3/payments/"+ids[1].(string), "", nil)
	require.Equal(t, 200, st)
	st, e := do(t, s, "GET", base+"/v3/payments/nope", "", nil)
	require.Equal(t, 404, st)
	require.Equal(t, "not_found", e["code"])
}

func TestDecline(t *testing.T) {
	t.Parallel()
	s, base, _ := start(t, yookassa.Options{})
	body := pay("1.00")
	body["payment_method_id"] = yookassa.MethodInsufficientFunds
	_, p := do(t, s, "POST", base+"/v3/payments", "d1", body)
	require.Equal(t, "canceled", p["status"])
	require.Equal(t, "insufficient_funds", p["cancellation_details"].(map[string]any)["reason"])
}

// The cursor is a position in the list, not an offset: payments created
// while a client pages go to the front and never shift an object onto a
// later page, so each is seen once.
func TestCursorPagingIsStableUnderCreation(t *testing.T) {
	t.Parallel()
	s, base, _ := start(t, yookassa.Options{})
	for i := range 5 {
		do(t, s, "POST", base+"/v3/payments", fmt.Sprint("old-", i), pay("1.00"))
	}
	seen := map[any]int{}
	next := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		q := url.Values{"limit": {"2"}}
		if next != "" {
			q.Set("cursor", next)
		}
		st, l := do(t, s, "GET", base+"/v3/payments?"+q.Encode(), "", nil)
		require.Equal(t, 200, st)
		for _, it := range l["items"].([]any) {
			seen[it.(map[string]any)["id"]]++
		}
		// Two new payments between pages: an offset cursor would serve the
		// same objects again.
		do(t, s, "POST", base+"/v3/payments", fmt.Sprint("new-a-", pages), pay("1.00"))
		do(t, s, "POST", base+"/v3/payments", fmt.Sprint("new-b-", pages), pay("1.00"))
		c, _ := l["next_cursor"].(string)
		if c == "" {
			break
		}
		next = c
	}
	require.Len(t, seen, 5, "every payment that existed when paging began, and only those")
	for id, n := range seen {
		require.Equal(t, 1, n, "payment %v served twice", id)
	}
	st, _ := do(t, s, "GET", base+"/v3/payments?cursor=bm9wZQ", "", nil)
	require.Equal(t, 400, st, "a cursor that is not ours")
}

// History seeds a shop's other traffic, evenly spread, as payments any
// list serves (the created_at filters compare to the millisecond the
// objects carry) and the ledger counts under their own keys; it refuses to
// seed before the newest payment, since the lists serve creation order.
func TestHistory(t *testing.T) {
	t.Parallel()
	s, base, clk := start(t, yookassa.Options{})
	from := clk.Now().Add(-time.Minute)
	require.NoError(t, s.History(60, from, from.Add(59*time.Second)))
	require.Equal(t, 60, s.TotalEffects())
	require.Equal(t, 1, s.Effects(yookassa.HistoryKey(60)))
	q := url.Values{"limit": {"100"}, "created_at.gte": {from.Add(10 * time.Second).Format(time.RFC3339Nano)},
		"created_at.lte": {from.Add(19 * time.Second).Format(time.RFC3339Nano)}}
	st, l := do(t, s, "GET", base+"/v3/payments?"+q.Encode(), "", nil)
	require.Equal(t, 200, st)
	items := l["items"].([]any)
	require.Len(t, items, 10, "one a second, both bounds included")
	require.Equal(t, from.Add(19*time.Second).Format("2006-01-02T15:04:05.000Z"), items[0].(map[string]any)["created_at"])

	st, _ = do(t, s, "POST", base+"/v3/payments", "live", pay("1.00"))
	require.Equal(t, 200, st)
	require.Error(t, s.History(1, from, from), "before the newest payment")
	require.Error(t, s.History(0, clk.Now(), clk.Now()))
	require.NoError(t, s.History(5, clk.Now(), clk.Now().Add(time.Second)))
	require.Equal(t, 66, s.TotalEffects())
}
