package amocrm_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/sandbox/amocrm"
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

func start(t *testing.T, opts amocrm.Options) (*amocrm.Server, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}
	opts.Clock = clk.Now
	s := amocrm.New(opts)
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

// call sends a request with the emulator's token (or tok when not empty).
func call(t *testing.T, s *amocrm.Server, method, path string, body any, tok string) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL()+path, rd)
	require.NoError(t, err)
	if tok == "" {
		tok = s.Token()
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &a.body), "%s", raw)
	}
	return a
}

func keyField(s *amocrm.Server, key string) map[string]any {
	return map[string]any{"field_id": s.KeyFieldID(), "values": []any{map[string]any{"value": key}}}
}

func lead(s *amocrm.Server, name, key, requestID string) map[string]any {
	return map[string]any{"name": name, "price": 1250, "request_id": requestID,
		"custom_fields_values": []any{keyField(s, key)}}
}

func embedded(t *testing.T, a answer, kind string) []map[string]any {
	t.Helper()
	emb, ok := a.body["_embedded"].(map[string]any)
	require.True(t, ok, "no _embedded in %v", a.body)
	items, ok := emb[kind].([]any)
	require.True(t, ok, "no _embedded.%s in %v", kind, a.body)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = it.(map[string]any)
	}
	return out
}

// TestLeadsHaveNoExternalID: amoCRM has no unique external id, so a repeated
// POST makes another lead, and each is a ledger effect under the key the
// client put in the key custom field (or in a tag).
func TestLeadsHaveNoExternalID(t *testing.T) {
	t.Parallel()
	s, _ := start(t, amocrm.Options{})
	const key = "test:crm.deal.create:deal-1:v1"
	var ids []any
	for i := range 2 {
		a := call(t, s, "POST", "/api/v4/leads", []any{lead(s, "Deal 1", key, "rq-"+strconv.Itoa(i))}, "")
		require.Equal(t, 200, a.status, "%v", a.body)
		require.Contains(t, a.header.Get("Content-Type"), "application/hal+json")
		got := embedded(t, a, "leads")
		require.Len(t, got, 1)
		require.Equal(t, "rq-"+strconv.Itoa(i), got[0]["request_id"], "request_id is echoed")
		ids = append(ids, got[0]["id"])
	}
	require.NotEqual(t, ids[0], ids[1], "a repeat is a new lead")
	require.Equal(t, 2, s.Effects(key))

	// The key may travel as a tag instead of a custom field.
	const tagKey = "test:crm.deal.create:deal-2:v1"
	a := call(t, s, "POST", "/api/v4/leads", []any{map[string]any{"name": "Deal 2",
		"_embedded": map[string]any{"tags": []any{map[string]any{"name": tagKey}}}}}, "")
	require.Equal(t, 200, a.status, "%v", a.body)
	require.Equal(t, 1, s.Effects(tagKey))

	// A batch makes one effect per lead.
	a = call(t, s, "POST", "/api/v4/leads", []any{lead(s, "A", "k-a", ""), lead(s, "B", "k-b", "")}, "")
	require.Equal(t, 200, a.status)
	require.Len(t, embedded(t, a, "leads"), 2)
	require.Equal(t, 1, s.Effects("k-a"))
	require.Equal(t, 1, s.Effects("k-b"))
	require.Equal(t, 5, s.TotalEffects())
	for _, e := range s.Ledger().Effects() {
		require.Equal(t, "lead", e.Kind)
		require.NotEmpty(t, e.ObjectID)
	}

	// Stored leads do not keep the request_id.
	a = call(t, s, "GET", "/api/v4/leads", nil, "")
	require.Equal(t, 200, a.status)
	for _, l := range embedded(t, a, "leads") {
		require.Empty(t, l["request_id"])
	}
}

// TestLeadSearchLagAndFuzzyQuery: a lead shows in query= search only
// SearchLag after its creation on the emulator clock; the search is fuzzy
// (every word of the query somewhere), so it may return other leads too.
func TestLeadSearchLagAndFuzzyQuery(t *testing.T) {
	t.Parallel()
	s, clk := start(t, amocrm.Options{SearchLag: 30 * time.Second})
	const key = "test:crm.deal.create:i-1:v1"
	require.Equal(t, 200, call(t, s, "POST", "/api/v4/leads", []any{lead(s, "First", key, "")}, "").status)
	require.Equal(t, 200, call(t, s, "POST", "/api/v4/leads", []any{lead(s, "Second", "test:crm.deal.create:i-10:v1", "")}, "").status)
	q := "/api/v4/leads?" + url.Values{"query": {key}}.Encode()

	a := call(t, s, "GET", q, nil, "")
	require.Equal(t, http.StatusNoContent, a.status, "not searchable before the lag")
	clk.Add(29 * time.Second)
	require.Equal(t, http.StatusNoContent, call(t, s, "GET", q, nil, "").status)
	clk.Add(time.Second)
	a = call(t, s, "GET", q, nil, "")
	require.Equal(t, 200, a.status)
	names := map[any]bool{}
	for _, l := range embedded(t, a, "leads") {
		names[l["name"]] = true
	}
	require.Equal(t, map[any]bool{"First": true, "Second": true}, names,
		"fuzzy: i-1's key matches i-10's lead too; the client verifies the object")

	miss := "/api/v4/leads?" + url.Values{"query": {"test:crm.deal.create:other:v1"}}.Encode()
	require.Equal(t, http.StatusNoContent, call(t, s, "GET", miss, nil, "").status)
}

func TestLeadValidation(t *testing.T) {
	t.Parallel()
	s, _ := start(t, amocrm.Options{})
	a := call(t, s, "POST", "/api/v4/leads", []any{}, "")
	require.Equal(t, 400, a.status)
	require.Contains(t, a.header.Get("Content-Type"), "application/problem+json")

	bad := lead(s, "X", "k-1", "")
	bad["custom_fields_values"] = []any{map[string]any{"field_id": 1, "values": []any{map[string]any{"value": "k-1"}}}}
	a = call(t, s, "POST", "/api/v4/leads", []any{lead(s, "ok", "k-0", ""), bad}, "")
	require.Equal(t, 400, a.status)
	verr := a.body["validation-errors"].([]any)[0].(map[string]any)
	require.Equal(t, "1", verr["request_id"], "the second lead of the batch")
	e := verr["errors"].([]any)[0].(map[string]any)
	require.Equal(t, "NotSupportedChoice", e["code"])
	require.Equal(t, "custom_fields_values.0.field_id", e["path"])

	neg := lead(s, "X", "k-2", "")
	neg["price"] = -1
	a = call(t, s, "POST", "/api/v4/leads", []any{neg}, "")
	require.Equal(t, 400, a.status)
	require.Equal(t, "InvalidType", a.body["validation-errors"].([]any)[0].(map[string]any)["errors"].([]any)[0].(map[string]any)["code"])

	require.Zero(t, s.TotalEffects(), "a refused batch creates nothing, not even its valid leads")
}

func task(text string, till int64) map[string]any {
	return map[string]any{"text": text, "complete_till": till, "responsible_user_id": 7, "task_type_id": 1}
}

// TestTasksCarryTheKeyInTheirText: a task has no key field either; the
// "[op:<key>]" marker in its text is what the ledger counts, and a repeat
// is another task.
func TestTasksCarryTheKeyInTheirText(t *testing.T) {
	t.Parallel()
	s, clk := start(t, amocrm.Options{})
	const key = "test:crm.task.create:call-1:v1"
	till := clk.Now().Add(24 * time.Hour).Unix()
	for range 2 {
		a := call(t, s, "POST", "/api/v4/tasks", []any{task("Call back [op:"+key+"]", till)}, "")
		require.Equal(t, 200, a.status, "%v", a.body)
		require.Len(t, embedded(t, a, "tasks"), 1)
	}
	require.Equal(t, 2, s.Effects(key))
	for _, e := range s.Ledger().Effects() {
		require.Equal(t, "task", e.Kind)
	}

	now := clk.Now().Unix()
	list := func(from, to int64) answer {
		return call(t, s, "GET", "/api/v4/tasks?"+url.Values{
			"filter[updated_at][from]": {strconv.FormatInt(from, 10)},
			"filter[updated_at][to]":   {strconv.FormatInt(to, 10)},
		}.Encode(), nil, "")
	}
	a := list(now-1, now+1)
	require.Equal(t, 200, a.status)
	tasks := embedded(t, a, "tasks")
	require.Len(t, tasks, 2)
	require.Equal(t, "Call back [op:"+key+"]", tasks[0]["text"])
	require.Equal(t, http.StatusNoContent, list(now+10, now+20).status, "nothing updated then")

	for _, tt := range []struct {
		name string
		body map[string]any
	}{
		{"blank text", task("  ", till)},
		{"no deadline", task("x [op:k]", 0)},
		{"no responsible", map[string]any{"text": "x [op:k]", "complete_till": till}},
	} {
		a := call(t, s, "POST", "/api/v4/tasks", []any{tt.body}, "")
		require.Equal(t, 400, a.status, tt.name)
		require.NotEmpty(t, a.body["validation-errors"], tt.name)
	}
	require.Equal(t, 0, s.Effects("k"))
}

func TestBearerTokenRequired(t *testing.T) {
	t.Parallel()
	s, _ := start(t, amocrm.Options{})
	a := call(t, s, "POST", "/api/v4/leads", []any{lead(s, "X", "k-1", "")}, "not-the-token")
	require.Equal(t, 401, a.status)
	require.Contains(t, a.header.Get("Content-Type"), "application/problem+json")
	require.Zero(t, s.TotalEffects())
}

// TestRateLimit: by default 7 requests a second; the eighth in the same
// second gets 429, and the bucket leaks with the emulator clock.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	s, clk := start(t, amocrm.Options{})
	for i := range amocrm.DefaultRatePerSec {
		require.NotEqual(t, 429, call(t, s, "GET", "/api/v4/leads", nil, "").status, "request %d", i+1)
	}
	a := call(t, s, "POST", "/api/v4/leads", []any{lead(s, "X", "k-limited", "")}, "")
	require.Equal(t, 429, a.status)
	require.Contains(t, a.header.Get("Content-Type"), "application/problem+json")
	require.Zero(t, s.Effects("k-limited"), "a throttled create makes nothing")
	clk.Add(time.Second)
	require.Equal(t, 200, call(t, s, "POST", "/api/v4/leads", []any{lead(s, "X", "k-limited", "")}, "").status)

	unlimited, _ := start(t, amocrm.Options{RatePerSec: -1})
	for range 3 * amocrm.DefaultRatePerSec {
		require.NotEqual(t, 429, call(t, unlimited, "GET", "/api/v4/leads", nil, "").status)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	s, clk := start(t, amocrm.Options{SearchLag: time.Second})

	// Throttled by a fault: amoCRM's own problem body, Retry-After, no lead.
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP429, Count: 1, RetryAfter: 2 * time.Second}))
	a := call(t, s, "POST", "/api/v4/leads", []any{lead(s, "X", "k-1", "")}, "")
	require.Equal(t, 429, a.status)
	require.Equal(t, "2", a.header.Get("Retry-After"))
	require.EqualValues(t, 429, a.body["status"])
	require.Zero(t, s.TotalEffects())

	// A connector that drops the key: the lead is made without it, so a
	// search by the key cannot find it, but the ledger counts it.
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey, Count: 1}))
	require.Equal(t, 200, call(t, s, "POST", "/api/v4/leads", []any{lead(s, "Dropped", "k-2", "")}, "").status)
	clk.Add(time.Minute)
	require.Equal(t, http.StatusNoContent, call(t, s, "GET", "/api/v4/leads?query=k-2", nil, "").status)
	require.Equal(t, 1, s.Effects("k-2"))
	effects := s.Ledger().Effects()
	require.True(t, effects[len(effects)-1].KeyIgnored)

	// A response lost after commit: the lead exists.
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
	b, _ := json.Marshal([]any{lead(s, "Lost", "k-3", "")})
	req, _ := http.NewRequest("POST", s.URL()+"/api/v4/leads", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.Token())
	_, err := http.DefaultClient.Do(req)
	require.Error(t, err, "the connection closes unanswered")
	require.Equal(t, 1, s.Effects("k-3"))
	clk.Add(time.Minute)
	require.Equal(t, 200, call(t, s, "GET", "/api/v4/leads?query=k-3", nil, "").status, "the lost lead is searchable")

	// Reset forgets leads and effects.
	s.Reset()
	require.Zero(t, s.TotalEffects())
	require.Equal(t, http.StatusNoContent, call(t, s, "GET", "/api/v4/leads", nil, "").status)
}
