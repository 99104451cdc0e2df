package bitrix24_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/sandbox/bitrix24"
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

func start(t *testing.T, opts bitrix24.Options) (*bitrix24.Server, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}
	opts.Clock = clk.Now
	s := bitrix24.New(opts)
	_, err := s.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

// call POSTs a method with a JSON body to root (the webhook URL).
func call(t *testing.T, root, method string, body any) answer {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(root+"/"+method, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{status: resp.StatusCode, header: resp.Header}
	require.NoError(t, json.Unmarshal(raw, &a.body), "%s", raw)
	return a
}

func deal(title, origin string) map[string]any {
	return map[string]any{"fields": map[string]any{"TITLE": title, "OPPORTUNITY": "1250.00", "CURRENCY_ID": "RUB",
		"ORIGINATOR_ID": "idemgate", "ORIGIN_ID": origin}}
}

func activity(subject, origin string) map[string]any {
	return map[string]any{"fields": map[string]any{"SUBJECT": subject, "RESPONSIBLE_ID": "7", "TYPE_ID": 6,
		"ORIGINATOR_ID": "idemgate", "ORIGIN_ID": origin}}
}

func results(t *testing.T, a answer) []map[string]any {
	t.Helper()
	items, ok := a.body["result"].([]any)
	require.True(t, ok, "result is not a list: %v", a.body)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = it.(map[string]any)
	}
	return out
}

// TestOriginIDIsStoredNotUnique: ORIGINATOR_ID/ORIGIN_ID are stored and
// filterable, but two adds with one ORIGIN_ID make two deals, each a ledger
// effect under that ORIGIN_ID.
func TestOriginIDIsStoredNotUnique(t *testing.T) {
	t.Parallel()
	s, _ := start(t, bitrix24.Options{})
	root := s.WebhookURL()
	const key = "test:crm.deal.create:deal-1:v1"
	var ids []any
	for range 2 {
		a := call(t, root, "crm.deal.add", deal("Deal 1", key))
		require.Equal(t, 200, a.status, "%v", a.body)
		require.NotNil(t, a.body["result"])
		tm := a.body["time"].(map[string]any)
		require.Contains(t, tm, "start")
		require.Contains(t, tm, "finish")
		ids = append(ids, a.body["result"])
	}
	require.NotEqual(t, ids[0], ids[1], "no uniqueness on ORIGIN_ID")
	require.Equal(t, 2, s.Effects(key))
	require.Equal(t, 2, s.Count("deal"))
	require.Equal(t, 200, call(t, root, "crm.deal.add", deal("Deal 2", "other")).status)

	for _, filter := range []map[string]any{
		{"=ORIGIN_ID": key, "=ORIGINATOR_ID": "idemgate"},
		{"ORIGIN_ID": key},
	} {
		a := call(t, root, "crm.deal.list", map[string]any{"filter": filter, "select": []string{"ID", "ORIGIN_ID"}})
		require.Equal(t, 200, a.status)
		got := results(t, a)
		require.Len(t, got, 2, "filter %v", filter)
		require.EqualValues(t, 2, a.body["total"])
		for _, d := range got {
			require.Equal(t, key, d["ORIGIN_ID"])
			require.NotEmpty(t, d["ID"])
			require.NotContains(t, d, "TITLE", "select limits the fields")
		}
	}
	// Operators outside the emulated subset ("=", ">=", "<=") are refused,
	// never answered with an empty list a lookup would read as "not found".
	a := call(t, root, "crm.deal.list", map[string]any{"filter": map[string]any{"!ORIGIN_ID": key}})
	require.Equal(t, 400, a.status)
	// select * (or none) returns every field.
	a = call(t, root, "crm.deal.list", map[string]any{"filter": map[string]any{"=ORIGIN_ID": "other"}, "select": []string{"*"}})
	got := results(t, a)
	require.Len(t, got, 1)
	require.Equal(t, "Deal 2", got[0]["TITLE"])
	require.NotEmpty(t, got[0]["DATE_CREATE"])
}

func TestActivities(t *testing.T) {
	t.Parallel()
	s, _ := start(t, bitrix24.Options{})
	root := s.WebhookURL()
	const key = "test:crm.task.create:call-1:v1"
	a := call(t, root, "crm.activity.add.json", activity("Call the customer", key))
	require.Equal(t, 200, a.status, "%v", a.body)
	require.Equal(t, 1, s.Effects(key))
	require.Equal(t, 1, s.Count("activity"))
	require.Zero(t, s.Count("deal"))
	e := s.Ledger().Effects()[0]
	require.Equal(t, "activity", e.Kind)
	require.Equal(t, key, e.Key)

	a = call(t, root, "crm.activity.list", map[string]any{"filter": map[string]any{"=ORIGIN_ID": key}})
	got := results(t, a)
	require.Len(t, got, 1)
	require.Equal(t, "Call the customer", got[0]["SUBJECT"])
	require.Empty(t, results(t, call(t, root, "crm.deal.list", map[string]any{"filter": map[string]any{"=ORIGIN_ID": key}})),
		"deals and activities are apart")
}

func TestValidation(t *testing.T) {
	t.Parallel()
	s, _ := start(t, bitrix24.Options{})
	root := s.WebhookURL()
	noTitle := deal("", "k")
	badCurrency := deal("D", "k")
	badCurrency["fields"].(map[string]any)["CURRENCY_ID"] = "XXX"
	badAmount := deal("D", "k")
	badAmount["fields"].(map[string]any)["OPPORTUNITY"] = "-1"
	noSubject := activity("", "k")
	badResponsible := activity("S", "k")
	badResponsible["fields"].(map[string]any)["RESPONSIBLE_ID"] = "manager"
	for _, tt := range []struct {
		name, method string
		body         map[string]any
	}{
		{"deal without TITLE", "crm.deal.add", noTitle},
		{"unknown currency", "crm.deal.add", badCurrency},
		{"negative amount", "crm.deal.add", badAmount},
		{"no fields", "crm.deal.add", map[string]any{}},
		{"activity without SUBJECT", "crm.activity.add", noSubject},
		{"activity without a responsible id", "crm.activity.add", badResponsible},
	} {
		a := call(t, root, tt.method, tt.body)
		require.Equal(t, 400, a.status, tt.name)
		require.Equal(t, "", a.body["error"], "%s: method-level errors have an empty code", tt.name)
		require.NotEmpty(t, a.body["error_description"], tt.name)
	}
	require.Zero(t, s.TotalEffects())
	require.Equal(t, 0, s.Effects("k"))
}

func TestAuthAndMethods(t *testing.T) {
	t.Parallel()
	s, _ := start(t, bitrix24.Options{})
	uid, code := s.Credentials()
	for _, root := range []string{s.URL() + "/rest/" + uid + "/wrong-code", s.URL() + "/rest/999/" + code} {
		a := call(t, root, "crm.deal.add", deal("D", "k"))
		require.Equal(t, 401, a.status)
		require.Equal(t, "NO_AUTH_FOUND", a.body["error"])
	}
	a := call(t, s.WebhookURL(), "crm.deal.delete", map[string]any{"id": 1})
	require.Equal(t, 404, a.status)
	require.Equal(t, "ERROR_METHOD_NOT_FOUND", a.body["error"])

	req, _ := http.NewRequest(http.MethodPut, s.WebhookURL()+"/crm.deal.add", bytes.NewReader([]byte(`{}`)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Zero(t, s.TotalEffects())
}

// TestLeakyBucket: each request adds one unit to the portal's bucket, which
// leaks LeakPerSec units a second on the emulator clock; a request that
// would overflow it gets 503 QUERY_LIMIT_EXCEEDED and creates nothing.
func TestLeakyBucket(t *testing.T) {
	t.Parallel()
	s, clk := start(t, bitrix24.Options{Bucket: 3, LeakPerSec: 1})
	root := s.WebhookURL()
	for i := range 3 {
		require.Equal(t, 200, call(t, root, "crm.deal.list", map[string]any{}).status, "request %d", i+1)
	}
	a := call(t, root, "crm.deal.add", deal("D", "k-over"))
	require.Equal(t, 503, a.status)
	require.Equal(t, "QUERY_LIMIT_EXCEEDED", a.body["error"])
	require.Zero(t, s.Effects("k-over"))
	clk.Add(time.Second)
	require.Equal(t, 200, call(t, root, "crm.deal.add", deal("D", "k-over")).status, "one unit leaked")
	require.Equal(t, 503, call(t, root, "crm.deal.list", map[string]any{}).status, "and only one")
	require.Equal(t, 1, s.Effects("k-over"))

	// The default bucket holds DefaultBucket requests; a negative one none.
	d, _ := start(t, bitrix24.Options{})
	for i := range bitrix24.DefaultBucket {
		require.Equal(t, 200, call(t, d.WebhookURL(), "crm.deal.list", map[string]any{}).status, "request %d", i+1)
	}
	require.Equal(t, 503, call(t, d.WebhookURL(), "crm.deal.list", map[string]any{}).status)
	off, _ := start(t, bitrix24.Options{Bucket: -1})
	for range bitrix24.DefaultBucket + 10 {
		require.Equal(t, 200, call(t, off.WebhookURL(), "crm.deal.list", map[string]any{}).status)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	s, _ := start(t, bitrix24.Options{})
	root := s.WebhookURL()

	// Injected limits answer with Bitrix24's own error bodies; a create
	// fault does not touch reads.
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP503, Count: 1, RetryAfter: time.Second}))
	require.Equal(t, 200, call(t, root, "crm.deal.list", map[string]any{}).status, "reads are not in the create scope")
	a := call(t, root, "crm.deal.add", deal("D", "k-1"))
	require.Equal(t, 503, a.status)
	require.Equal(t, "QUERY_LIMIT_EXCEEDED", a.body["error"])
	require.Equal(t, "1", a.header.Get("Retry-After"))
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP429, Count: 1}))
	a = call(t, root, "crm.activity.add", activity("S", "k-1"))
	require.Equal(t, 429, a.status)
	require.Equal(t, "OPERATION_TIME_LIMIT", a.body["error"])
	require.Zero(t, s.TotalEffects())

	// A connector that drops the key: the deal is made without
	// ORIGINATOR_ID/ORIGIN_ID, so the filter cannot find it; the ledger
	// counts it under the key that was sent.
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey, Count: 1}))
	require.Equal(t, 200, call(t, root, "crm.deal.add", deal("D", "k-2")).status)
	require.Empty(t, results(t, call(t, root, "crm.deal.list", map[string]any{"filter": map[string]any{"=ORIGIN_ID": "k-2"}})))
	require.Equal(t, 1, s.Effects("k-2"))
	require.True(t, s.Ledger().Effects()[0].KeyIgnored)

	// A response lost after commit: the deal exists and is found.
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultResetAfterCommit, Count: 1}))
	b, _ := json.Marshal(deal("D", "k-3"))
	_, err := http.Post(root+"/crm.deal.add", "application/json", bytes.NewReader(b))
	require.Error(t, err, "the connection is reset")
	require.Equal(t, 1, s.Effects("k-3"))
	require.Len(t, results(t, call(t, root, "crm.deal.list", map[string]any{"filter": map[string]any{"=ORIGIN_ID": "k-3"}})), 1)

	s.Reset()
	require.Zero(t, s.TotalEffects())
	require.Zero(t, s.Count("deal"))
}
