package bitrix24_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sb "github.com/idemgate/idemgate/sandbox/bitrix24"
)

func dealOp(intent string, variant int) operation.Operation {
	return adaptertest.Op(bitrix24.OpDealCreate, intent, map[string]any{
		"title": "Deal " + intent, "customer_id": "17", "amount_minor": 100000 + variant*100, "currency": "RUB"})
}

func taskOp(intent string, variant int) operation.Operation {
	return adaptertest.Op(bitrix24.OpTaskCreate, intent, map[string]any{
		"title": fmt.Sprintf("Call back %s v%d", intent, variant), "responsible_id": "5", "customer_id": "17",
		"deadline": time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC), "description": "callback"})
}

func setup(t *testing.T, opts sb.Options) (*bitrix24.Adapter, *sb.Server) {
	t.Helper()
	srv := sb.New(opts)
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return newAdapter(t, srv.URL(), srv, nil), srv
}

// newAdapter builds an adapter for the emulator srv reached at base, with
// the client-side rate limit off unless mod sets one.
func newAdapter(t *testing.T, base string, srv *sb.Server, mod func(*bitrix24.Config)) *bitrix24.Adapter {
	t.Helper()
	uid, code := srv.Credentials()
	cfg := bitrix24.Config{
		PortalURL:   base,
		UserID:      uid,
		WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)},
		HTTPConfig:  adapters.HTTPConfig{Timeout: time.Second, RateLimit: adapters.RateLimit{Rate: -1}},
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := bitrix24.New(cfg)
	require.NoError(t, err)
	return a
}

// first is the context of a key's first attempt, as the worker gives it.
func first(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return adapters.WithAttempt(c, adapters.Attempt{Number: 1, Since: time.Now().Add(-time.Second)})
}

func harness(op func(string, int) operation.Operation, invalid func(string) operation.Operation) adaptertest.Harness {
	return adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			a, srv := setup(t, sb.Options{})
			return adaptertest.Setup{Adapter: a, Sandbox: srv}
		},
		Op: op, Invalid: invalid, Secret: sb.DefaultWebhookCode,
		ReplayDedup:     true, // list before add, under the per-key lock
		DetectsMismatch: true, // the found object is compared with the payload
		// The connector drops ORIGIN_ID; the marker in the text is found.
		IgnoreKeyEffects: 1,
		ConcurrentDedup:  true,
	}
}

func TestContractDeal(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, harness(dealOp, func(intent string) operation.Operation {
		o := dealOp(intent, 0)
		o.Fields["currency"] = "XXX" // the portal refuses it (400)
		return o
	}))
}

func TestContractTask(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, harness(taskOp, func(intent string) operation.Operation {
		o := taskOp(intent, 0)
		o.Fields["responsible_id"] = "nobody" // the portal refuses it (400)
		return o
	}))
}

func TestQueryLimitIsRetry(t *testing.T) {
	t.Parallel()
	a, srv := setup(t, sb.Options{Bucket: 2, LeakPerSec: 0.01})
	_, err := a.Execute(first(t), dealOp(adaptertest.Intent("limit"), 0)) // list, add: 2 units (the re-list is refused)
	require.NoError(t, err)
	_, err = a.Execute(first(t), dealOp(adaptertest.Intent("limit"), 0))
	adaptertest.RequireClass(t, err, adapters.Retry, adapters.CodeTargetRateLimit)
	require.Equal(t, 1, srv.TotalEffects())
}

func TestWrongWebhookCode(t *testing.T) {
	t.Parallel()
	srv := sb.New(sb.Options{})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	a, err := bitrix24.New(bitrix24.Config{PortalURL: srv.URL(), UserID: "1", WebhookCode: adapters.WebhookCode{Value: "wrongcode123"}})
	require.NoError(t, err)
	_, err = a.Execute(context.Background(), dealOp(adaptertest.Intent("auth"), 0))
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeAuthorizationDenied)
	require.NotContains(t, err.Error(), "wrongcode123")
	require.Equal(t, 0, srv.TotalEffects())
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]bitrix24.Config{
		"no_url":   {UserID: "1"},
		"path":     {PortalURL: "https://x.bitrix24.ru/rest/1/code", UserID: "1"},
		"no_user":  {PortalURL: "https://x.bitrix24.ru"},
		"bad_user": {PortalURL: "https://x.bitrix24.ru", UserID: "1/2"},
	} {
		require.ErrorIs(t, c.WithDefaults().Validate(), bitrix24.ErrInvalidConfig, name)
	}
	_, err := bitrix24.New(bitrix24.Config{PortalURL: "https://x.bitrix24.ru", UserID: "1", HTTPConfig: adapters.HTTPConfig{Getenv: func(string) string { return "" }}})
	require.ErrorIs(t, err, adapters.ErrNoCredential)
	a, err := bitrix24.New(bitrix24.Config{PortalURL: "https://x.bitrix24.ru", UserID: "1", WebhookCode: adapters.WebhookCode{Value: "abc"}})
	require.NoError(t, err)
	require.True(t, a.Capabilities().SingleFlight)
}

// portalFront serves the emulator through a handler that counts requests
// per method and 503 answers, and can hold the next add until released.
type portalFront struct {
	url     string
	mu      sync.Mutex
	methods map[string]int
	refused int
	gate    chan struct{} // when set, the next add waits for it to close
	held    chan struct{} // closed when the held add arrived
}

func newFront(t *testing.T, srv *sb.Server) *portalFront {
	t.Helper()
	f := &portalFront{methods: map[string]int{}}
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := strings.TrimSuffix(path.Base(r.URL.Path), ".json")
		f.mu.Lock()
		f.methods[method]++
		gate, held := f.gate, f.held
		if strings.HasSuffix(method, ".add") {
			f.gate = nil
		}
		f.mu.Unlock()
		if gate != nil && strings.HasSuffix(method, ".add") {
			close(held)
			<-gate
		}
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusServiceUnavailable {
			f.mu.Lock()
			f.refused++
			f.mu.Unlock()
		}
	}))
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

// holdNextAdd makes the next add wait until the returned release is called;
// held is closed once it has arrived.
func (f *portalFront) holdNextAdd() (held <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate, f.held = make(chan struct{}), make(chan struct{})
	gate := f.gate
	return f.held, func() { close(gate) }
}

func (f *portalFront) counts() (map[string]int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int{}
	for k, v := range f.methods {
		m[k] = v
	}
	return m, f.refused
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
	r.ResponseWriter.WriteHeader(s)
}

func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return r.ResponseWriter.(http.Hijacker).Hijack()
}

func startPortal(t *testing.T, opts sb.Options) *sb.Server {
	t.Helper()
	srv := sb.New(opts)
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return srv
}

// Every task costs the portal's bucket 3 requests (list, add, re-list):
// N tasks at once used to overflow it and meet 503 QUERY_LIMIT_EXCEEDED.
// The adapter's own bucket makes them wait for their slot instead: no 503,
// and exactly N tasks. The adapter's bucket runs at half the portal's leak
// rate, in bursts of a quarter of its bucket: requests a busy machine
// bunches up on their way (a slot is taken before the request is written)
// still fit, up to 1.5 s of such delay (5 + 10/s × 1.5 s = 20).
func TestConcurrentTasksWaitForThePortalBucket(t *testing.T) {
	t.Parallel()
	srv := startPortal(t, sb.Options{Bucket: 20, LeakPerSec: 20})
	f := newFront(t, srv)
	a := newAdapter(t, f.url, srv, func(c *bitrix24.Config) {
		c.RateLimit = adapters.RateLimit{Rate: 10, Burst: 5}
		c.Timeout = 20 * time.Second
	})
	const n = 30
	ops := make([]operation.Operation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ops[i] = taskOp(adaptertest.Intent("bucket"), 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = a.Execute(first(t), ops[i])
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "task %d", i)
		require.Equal(t, 1, srv.Effects(ops[i].Key.String()))
	}
	require.Equal(t, n, srv.TotalEffects())
	methods, refused := f.counts()
	require.Zero(t, refused, "503 QUERY_LIMIT_EXCEEDED answers")
	require.Equal(t, map[string]int{"crm.activity.list": 2 * n, "crm.activity.add": n}, methods,
		"a first attempt costs a list, an add and a re-list")
}

// A dead or slow owner's add that lands after another replica created the
// object makes a second one (Bitrix24 keeps ORIGIN_ID without a uniqueness
// check). The late owner's re-list sees both and reports them: the oldest
// is the operation's, the other a duplicate for an operator.
func TestLateAddIsReportedAsDuplicate(t *testing.T) {
	t.Parallel()
	srv := startPortal(t, sb.Options{})
	f := newFront(t, srv)
	replicaA := newAdapter(t, f.url, srv, nil)
	replicaB := newAdapter(t, f.url, srv, nil)
	op := taskOp(adaptertest.Intent("late"), 0)
	key := op.Key.String()
	since := time.Now().Add(-time.Second)

	held, release := f.holdNextAdd()
	type result struct {
		out adapters.Outcome
		err error
	}
	late := make(chan result, 1)
	go func() {
		out, err := replicaA.Execute(adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 1, Since: since}), op)
		late <- result{out, err}
	}()
	<-held // A's add waits in front of the portal.
	b, err := replicaB.Execute(adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 2, Since: since}), op)
	require.NoError(t, err)
	require.Empty(t, b.Duplicates, "B created the only object it could see")
	release()
	a := <-late
	require.NoError(t, a.err)
	require.Equal(t, 2, srv.Effects(key), "the late add made a second task")
	require.Equal(t, b.ObjectID, a.out.ObjectID, "the oldest task is the operation's")
	require.Len(t, a.out.Duplicates, 1)
	require.NotEqual(t, b.ObjectID, a.out.Duplicates[0])
	require.Equal(t, 1, a.out.Details["duplicates"])
	require.Equal(t, a.out.Duplicates, a.out.Details["duplicate_object_ids"])

	keyOnly := op
	keyOnly.Fields = nil
	lr, err := replicaB.Lookup(context.Background(), keyOnly)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, b.ObjectID, lr.Outcome.ObjectID)
	require.Equal(t, a.out.Duplicates, lr.Outcome.Duplicates)
	require.Equal(t, adapters.CodeDuplicateObjects, lr.Code)
}

// Behind a connector that maps only business fields, ORIGIN_ID is lost but
// the marker in the text is not: a lookup by key alone finds the task, and a
// retried attempt returns it instead of adding a second.
func TestKeyDroppingConnectorIsCaughtByTheMarker(t *testing.T) {
	t.Parallel()
	for name, op := range map[string]func(string, int) operation.Operation{"deal": dealOp, "task": taskOp} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, srv := setup(t, sb.Options{})
			require.NoError(t, srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey}))
			o := op(adaptertest.Intent("dropped"), 0)
			since := time.Now().Add(-time.Second)
			out, err := a.Execute(adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 1, Since: since}), o)
			require.NoError(t, err)
			require.Equal(t, false, out.Details["key_stored"])

			keyOnly := o
			keyOnly.Fields = nil
			lr, err := a.Lookup(adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 1, Since: since}), keyOnly)
			require.NoError(t, err)
			require.Equal(t, adapters.Found, lr.Status)
			require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)

			again, err := a.Execute(adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 2, Since: since}), o)
			require.NoError(t, err)
			require.Equal(t, out.ObjectID, again.ObjectID)
			require.Equal(t, 1, srv.Effects(o.Key.String()), "the retry found the object instead of adding another")
		})
	}
}

func TestDefaultSettleTimeOutlastsTheTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout, settle, want time.Duration
	}{
		{0, 0, 2 * bitrix24.DefaultTimeout},
		{10 * time.Second, 0, 20 * time.Second},
		{10 * time.Second, 15 * time.Second, 15 * time.Second},
		{10 * time.Second, -1, 0},
	} {
		a, err := bitrix24.New(bitrix24.Config{
			PortalURL:   "https://x.bitrix24.ru",
			UserID:      "1",
			WebhookCode: adapters.WebhookCode{Value: "abc"},
			SettleTime:  tc.settle,
			HTTPConfig:  adapters.HTTPConfig{Timeout: tc.timeout},
		})
		require.NoError(t, err)
		require.Equal(t, tc.want, a.Capabilities().SettleTime)
	}
}
