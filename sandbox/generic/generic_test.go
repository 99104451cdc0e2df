package generic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/sandbox"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func start(t *testing.T, spec Spec, clk *clock) (*Server, string) {
	t.Helper()
	s, err := New(Options{Options: sandbox.Options{Clock: clk.Now}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, u
}

func do(t *testing.T, method, url, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func TestUniqueKeyGetAndSearchLag(t *testing.T) {
	clk := &clock{now: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	s, u := start(t, Spec{
		Name: "wh", CreatePath: "/api/shipments", KeyField: "externalCode", UniqueKey: true,
		DuplicateBody: map[string]any{"error": "duplicate_external_code"},
		GetPath:       "/api/shipments/by-code/{key}", SearchPath: "/api/shipments", SearchItems: "rows", SearchText: "search",
		SearchLag: 5 * time.Second, KeyEchoField: "externalCode", Positive: []string{"quantity"}, Token: "tok",
	}, clk)
	auth := map[string]string{"Authorization": "Bearer tok"}
	if code, _ := do(t, http.MethodPost, u+"/api/shipments", `{"externalCode":"k1","quantity":2}`, nil); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	code, obj := do(t, http.MethodPost, u+"/api/shipments", `{"externalCode":"k1","quantity":2,"description":"x [op:k1]"}`, auth)
	if code != http.StatusCreated || obj["id"] == "" || obj["externalCode"] != "k1" {
		t.Fatalf("create: %d %v", code, obj)
	}
	code, dup := do(t, http.MethodPost, u+"/api/shipments", `{"externalCode":"k1","quantity":2}`, auth)
	if code != http.StatusConflict || dup["error"] != "duplicate_external_code" || s.Effects("k1") != 1 {
		t.Fatalf("duplicate: %d %v, effects %d", code, dup, s.Effects("k1"))
	}
	if code, got := do(t, http.MethodGet, u+"/api/shipments/by-code/k1", "", auth); code != http.StatusOK || got["id"] != obj["id"] {
		t.Fatalf("get: %d %v", code, got)
	}
	if code, _ := do(t, http.MethodGet, u+"/api/shipments/by-code/k2", "", auth); code != http.StatusNotFound {
		t.Fatalf("get unknown: %d", code)
	}
	_, list := do(t, http.MethodGet, u+"/api/shipments?search=%5Bop%3Ak1%5D", "", auth)
	if rows, _ := list["rows"].([]any); len(rows) != 0 {
		t.Fatalf("search inside the lag found %d", len(rows))
	}
	clk.add(5 * time.Second)
	_, list = do(t, http.MethodGet, u+"/api/shipments?search=%5Bop%3Ak1%5D", "", auth)
	if rows, _ := list["rows"].([]any); len(rows) != 1 {
		t.Fatalf("search after the lag found %d", len(rows))
	}
	if code, _ := do(t, http.MethodPost, u+"/api/shipments", `{"externalCode":"k3","quantity":0}`, auth); code != http.StatusBadRequest || s.TotalEffects() != 1 {
		t.Fatalf("validation: %d, effects %d", code, s.TotalEffects())
	}
	// Behind a connector that drops the key member, a repeat is a new object.
	if err := s.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey, Scope: sandbox.ScopeAny}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if code, got := do(t, http.MethodPost, u+"/api/shipments", `{"externalCode":"k4","quantity":1}`, auth); code != http.StatusCreated || got["externalCode"] != "" {
			t.Fatalf("ignored key: %d %v", code, got)
		}
	}
	if s.Effects("k4") != 2 {
		t.Fatalf("effects behind the connector: %d", s.Effects("k4"))
	}
}

func TestHonourKey(t *testing.T) {
	clk := &clock{now: time.Now()}
	s, u := start(t, Spec{Name: "p", CreatePath: "/v1/parcels", KeyHeader: "Idempotency-Key", HonourKey: true}, clk)
	h := map[string]string{"Idempotency-Key": "k1"}
	_, a := do(t, http.MethodPost, u+"/v1/parcels", `{"qty":1}`, h)
	code, b := do(t, http.MethodPost, u+"/v1/parcels", `{"qty":1}`, h)
	if code != http.StatusOK || a["id"] != b["id"] {
		t.Fatalf("replay: %d %v %v", code, a, b)
	}
	if code, m := do(t, http.MethodPost, u+"/v1/parcels", `{"qty":2}`, h); code != http.StatusConflict || m["error"] != "idempotency_key_reused" {
		t.Fatalf("reuse: %d %v", code, m)
	}
	if s.Effects("k1") != 1 {
		t.Fatalf("effects %d", s.Effects("k1"))
	}
}

func TestInvalidSpec(t *testing.T) {
	for name, spec := range map[string]Spec{
		"no name":      {CreatePath: "/x", KeyHeader: "K"},
		"no key":       {Name: "x", CreatePath: "/x"},
		"two keys":     {Name: "x", CreatePath: "/x", KeyHeader: "K", KeyField: "k"},
		"both":         {Name: "x", CreatePath: "/x", KeyHeader: "K", HonourKey: true, UniqueKey: true},
		"get path":     {Name: "x", CreatePath: "/x", KeyHeader: "K", GetPath: "/x/id"},
		"relative url": {Name: "x", CreatePath: "x", KeyHeader: "K"},
	} {
		if _, err := New(Options{Spec: spec}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
