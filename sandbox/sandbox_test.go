package sandbox_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
)

// toy is a minimal emulator: POST /objects with header Key creates an object
// once per key; GET /objects/{key} reads it.
type toy struct {
	*sandbox.Core
	mu   sync.Mutex
	objs map[string]string
	n    int
}

func newToy(opts sandbox.Options) *toy {
	s := &toy{objs: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /objects", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Key")
		if sandbox.KeyIgnored(r.Context()) {
			key = ""
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if id, ok := s.objs[key]; ok && key != "" {
			sandbox.WriteJSON(w, http.StatusOK, "", map[string]string{"id": id})
			return
		}
		s.n++
		id := "obj-" + string(rune('0'+s.n))
		if key != "" {
			s.objs[key] = id
		}
		s.Record(r.Context(), r.Header.Get("Key"), "object", id)
		sandbox.WriteJSON(w, http.StatusCreated, "", map[string]string{"id": id})
	})
	s.Core = sandbox.NewCore(sandbox.Spec{Name: "toy", Handler: mux, OnReset: func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.objs = map[string]string{}
	}}, opts)
	return s
}

func start(t *testing.T, opts sandbox.Options) (*toy, string) {
	t.Helper()
	s := newToy(opts)
	u, err := s.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, u
}

func post(t *testing.T, c *http.Client, u, key string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u+"/objects", strings.NewReader("{}"))
	require.NoError(t, err)
	req.GetBody = nil
	req.Header.Set("Key", key)
	resp, err := c.Do(req)
	if err == nil {
		t.Cleanup(func() { _ = resp.Body.Close() })
	}
	return resp, err
}

func TestLedgerCountsEffectsPerKey(t *testing.T) {
	t.Parallel()
	s, u := start(t, sandbox.Options{})
	c := &http.Client{Timeout: 5 * time.Second}
	for range 3 {
		resp, err := post(t, c, u, "k1")
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300)
	}
	_, err := post(t, c, u, "k2")
	require.NoError(t, err)
	require.Equal(t, 1, s.Effects("k1"))
	require.Equal(t, 1, s.Effects("k2"))
	require.Equal(t, 2, s.TotalEffects())
	require.Equal(t, []string{"k1", "k2"}, []string{s.Ledger().Effects()[0].Key, s.Ledger().Effects()[1].Key})
}

func TestFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		fault      sandbox.Fault
		wantErr    bool
		wantStatus int
		effects    int
	}{
		{"429", sandbox.Fault{Kind: sandbox.FaultHTTP429, Count: 1, RetryAfter: 1500 * time.Millisecond}, false, 429, 0},
		{"502", sandbox.Fault{Kind: sandbox.FaultHTTP502, Count: 1}, false, 502, 0},
		{"503", sandbox.Fault{Kind: sandbox.FaultHTTP503, Count: 1}, false, 503, 0},
		{"reset_before", sandbox.Fault{Kind: sandbox.FaultResetBefore, Count: 1}, true, 0, 0},
		{"close_after_commit", sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}, true, 0, 1},
		{"reset_after_commit", sandbox.Fault{Kind: sandbox.FaultResetAfterCommit, Count: 1}, true, 0, 1},
		{"hang_after_commit", sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Count: 1}, true, 0, 1},
		{"500_after_commit", sandbox.Fault{Kind: sandbox.FaultHTTP500AfterCommit, Count: 1}, false, 500, 1},
		{"502_after_commit", sandbox.Fault{Kind: sandbox.FaultHTTP502AfterCommit, Count: 1}, false, 502, 1},
		{"truncate_after_commit", sandbox.Fault{Kind: sandbox.FaultTruncateAfterCommit, Count: 1}, false, 201, 1},
		{"raw_before", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 200, Body: "garbage"}, false, 200, 0},
		{"raw_commit", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 200, Body: "garbage", Commit: true}, false, 200, 1},
		{"delay", sandbox.Fault{Kind: sandbox.FaultDelay, Count: 1, Delay: 10 * time.Millisecond}, false, 201, 1},
		{"read_scope_spares_creates", sandbox.Fault{Kind: sandbox.FaultHTTP503, Scope: sandbox.ScopeRead}, false, 201, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, u := start(t, sandbox.Options{})
			require.NoError(t, s.InjectFault(tc.fault))
			// Only a hung response needs the client to give up soon; every
			// other case has all the time a loaded machine may take.
			c := &http.Client{Timeout: 10 * time.Second}
			if tc.fault.Kind == sandbox.FaultLoseResponseHang {
				c.Timeout = 300 * time.Millisecond
			}
			resp, err := post(t, c, u, "k")
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.wantStatus, resp.StatusCode)
				if tc.fault.Kind == sandbox.FaultHTTP429 {
					require.Equal(t, "2", resp.Header.Get("Retry-After"))
				}
				if tc.fault.Kind == sandbox.FaultTruncateAfterCommit {
					b, err := io.ReadAll(resp.Body)
					require.NoError(t, err)
					require.False(t, json.Valid(b))
				}
			}
			require.Equal(t, tc.effects, s.Effects("k"))
			// Count faults are used up: the next request is normal and the
			// key was kept by the target.
			resp, err = post(t, c, u, "k")
			require.NoError(t, err)
			require.Less(t, resp.StatusCode, 300)
			require.Equal(t, max(tc.effects, 1), s.Effects("k"))
		})
	}
}

func TestIgnoreKeyCreatesPerRequest(t *testing.T) {
	t.Parallel()
	s, u := start(t, sandbox.Options{})
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey}))
	c := &http.Client{Timeout: 5 * time.Second}
	for range 3 {
		_, err := post(t, c, u, "k")
		require.NoError(t, err)
	}
	require.Equal(t, 3, s.Effects("k"))
	require.True(t, s.Ledger().Effects()[0].KeyIgnored)
	s.ClearFaults()
	_, err := post(t, c, u, "k")
	require.NoError(t, err)
	require.Equal(t, 4, s.Effects("k"), "the target never stored the key")
}

// TestDropKeyAfterCommit: a connector drops the key, the target commits, and
// a gateway answers 502. The target never stored the key, so the same key
// sent again makes a second effect.
func TestDropKeyAfterCommit(t *testing.T) {
	t.Parallel()
	s, u := start(t, sandbox.Options{})
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP502AfterCommit, Count: 1, DropKey: true}))
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := post(t, c, u, "k")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Equal(t, 1, s.Effects("k"))
	require.True(t, s.Ledger().Effects()[0].KeyIgnored)
	_, err = post(t, c, u, "k")
	require.NoError(t, err)
	require.Equal(t, 2, s.Effects("k"), "the target never saw the key of the first request")
	require.ErrorIs(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP502, DropKey: true}), sandbox.ErrInvalidFault,
		"a key dropped before a request that is not processed changes nothing")
}

func TestRateFaultIsDeterministic(t *testing.T) {
	t.Parallel()
	run := func() []int {
		s, u := start(t, sandbox.Options{Seed: 42})
		require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP503, Rate: 0.5}))
		c := &http.Client{Timeout: 5 * time.Second}
		var codes []int
		for i := range 20 {
			resp, err := post(t, c, u, "k"+string(rune('a'+i)))
			require.NoError(t, err)
			codes = append(codes, resp.StatusCode)
		}
		return codes
	}
	a, b := run(), run()
	require.Equal(t, a, b)
	require.Contains(t, a, 503)
	require.Contains(t, a, 201)
}

func TestHangIsReleasedByClose(t *testing.T) {
	t.Parallel()
	s := newToy(sandbox.Options{})
	u, err := s.Start("")
	require.NoError(t, err)
	require.NoError(t, s.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang}))
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, u+"/objects", strings.NewReader("{}"))
		req.Header.Set("Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return s.Effects("k") == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Close())
	require.Error(t, <-done)
	require.NoError(t, s.Close(), "Close twice")
}

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	s, u := start(t, sandbox.Options{})
	c := &http.Client{Timeout: 5 * time.Second}
	do := func(method, path, body string) (int, []byte) {
		req, err := http.NewRequest(method, u+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}
	code, _ := do(http.MethodPost, "/_sandbox/faults", `{"kind":"http_429","count":1,"retry_after_ms":2000}`)
	require.Equal(t, http.StatusNoContent, code)
	code, b := do(http.MethodGet, "/_sandbox/faults", "")
	require.Equal(t, 200, code)
	require.Contains(t, string(b), `"retry_after_ms":2000`)
	code, _ = do(http.MethodPost, "/_sandbox/faults", `{"kind":"nope"}`)
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = do(http.MethodPost, "/_sandbox/faults", `[{"kind":"delay"}]`)
	require.Equal(t, http.StatusBadRequest, code, "delay without delay_ms")

	resp, err := post(t, c, u, "k")
	require.NoError(t, err)
	require.Equal(t, 429, resp.StatusCode)
	_, err = post(t, c, u, "k")
	require.NoError(t, err)

	code, b = do(http.MethodGet, "/_sandbox/ledger", "")
	require.Equal(t, 200, code)
	var led struct {
		Target  string           `json:"target"`
		Total   int              `json:"total"`
		ByKey   map[string]int   `json:"by_key"`
		Effects []sandbox.Effect `json:"effects"`
	}
	require.NoError(t, json.Unmarshal(b, &led))
	require.Equal(t, "toy", led.Target)
	require.Equal(t, 1, led.Total)
	require.Equal(t, 1, led.ByKey["k"])
	code, b = do(http.MethodGet, "/_sandbox/ledger?key=k", "")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"key":"k","count":1}`, string(b))

	code, _ = do(http.MethodPost, "/_sandbox/reset", "")
	require.Equal(t, http.StatusNoContent, code)
	require.Equal(t, 0, s.TotalEffects())
	code, _ = do(http.MethodGet, "/_sandbox/nothing", "")
	require.Equal(t, http.StatusNotFound, code)
}

// A Group starts its emulators on the addresses asked (free loopback ports
// otherwise), refuses an address for an emulator it does not hold, and
// stops them all.
func TestGroupStart(t *testing.T) {
	t.Parallel()
	g := sandbox.Group{newToy(sandbox.Options{}), newToy(sandbox.Options{})}
	require.ErrorIs(t, g.Start(map[string]string{"nope": ""}), sandbox.ErrUnknownTarget)
	require.Empty(t, g[0].URL(), "nothing started")
	require.NoError(t, g.Start(nil))
	require.Equal(t, []string{"toy", "toy"}, g.Names())
	for _, u := range []string{g[0].URL(), g[1].URL()} {
		require.Contains(t, u, "http://127.0.0.1:")
		resp, err := http.Get(u + "/_sandbox/ledger")
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "safe twice")
	_, err := http.Get(g[0].URL() + "/_sandbox/ledger")
	require.Error(t, err, "stopped")
}

func TestFaultValidate(t *testing.T) {
	t.Parallel()
	bad := []sandbox.Fault{
		{Kind: "x"},
		{Kind: sandbox.FaultHTTP429, Count: 1, Rate: 0.5},
		{Kind: sandbox.FaultHTTP429, Rate: 2},
		{Kind: sandbox.FaultHTTP429, Scope: "write"},
		{Kind: sandbox.FaultRawResponse, Status: 5},
	}
	for _, f := range bad {
		require.ErrorIs(t, f.Validate(), sandbox.ErrInvalidFault)
	}
}

func TestLeakyBucket(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	b := sandbox.NewLeakyBucket(2, 1, func() time.Time { return now })
	ok, _ := b.Allow()
	require.True(t, ok)
	ok, _ = b.Allow()
	require.True(t, ok)
	ok, wait := b.Allow()
	require.False(t, ok)
	require.Equal(t, time.Second, wait)
	now = now.Add(time.Second)
	ok, _ = b.Allow()
	require.True(t, ok)
}
