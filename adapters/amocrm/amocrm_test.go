package amocrm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/amocrm"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sb "github.com/idemgate/idemgate/sandbox/amocrm"
)

func leadOp(intent string, variant int) operation.Operation {
	return adaptertest.Op(amocrm.OpDealCreate, intent, map[string]any{
		"title": "Deal " + intent, "customer_id": "321", "amount_minor": 100000 + variant*100, "currency": "RUB"})
}

func taskOp(intent string, variant int) operation.Operation {
	return adaptertest.Op(amocrm.OpTaskCreate, intent, map[string]any{
		"title": fmt.Sprintf("Call back %s v%d", intent, variant), "responsible_id": "321123",
		"deadline": time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)})
}

// clock is a settable clock shared by emulator and adapter.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func setup(t *testing.T, opts sb.Options, cfg amocrm.Config) (*amocrm.Adapter, *sb.Server) {
	t.Helper()
	if opts.RatePerSec == 0 {
		opts.RatePerSec = -1
	}
	srv := sb.New(opts)
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	cfg.BaseURL, cfg.Token.Value, cfg.Timeout = srv.URL(), redact.Secret(srv.Token()), time.Second
	if cfg.KeyFieldID == 0 {
		cfg.KeyFieldID = srv.KeyFieldID()
	} else if cfg.KeyFieldID < 0 {
		cfg.KeyFieldID = 0
	}
	if cfg.SettleTime == 0 {
		cfg.SettleTime = -1 // the emulator has no lag unless a test asks for it
	}
	if cfg.RateLimit.Rate == 0 {
		cfg.RateLimit.Rate = -1 // the emulator has no limit unless a test asks for it
	}
	a, err := amocrm.New(cfg)
	require.NoError(t, err)
	return a, srv
}

func harness(op func(string, int) operation.Operation, invalid func(string) operation.Operation) adaptertest.Harness {
	return adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			a, srv := setup(t, sb.Options{}, amocrm.Config{})
			return adaptertest.Setup{Adapter: a, Sandbox: srv}
		},
		Op: op, Invalid: invalid, Secret: sb.DefaultToken,
		ReplayDedup:     true, // searched before every create
		DetectsMismatch: true, // the found object is compared with the payload
		// The connector drops the key field and tags; the marker in the
		// lead's name or the task's text is found.
		IgnoreKeyEffects: 1,
		ConcurrentDedup:  true,
	}
}

// invalidLead is a lead amoCRM cannot take: its price is in whole units.
func invalidLead(intent string) operation.Operation {
	o := leadOp(intent, 0)
	o.Fields["amount_minor"] = int64(12345) // not whole units
	return o
}

func TestContractLead(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, harness(leadOp, invalidLead))
}

func TestContractTask(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, harness(taskOp, func(intent string) operation.Operation {
		o := taskOp(intent, 0)
		o.Fields["title"] = ""
		return o
	}))
}

func TestContractLeadTagOnly(t *testing.T) {
	t.Parallel()
	h := harness(leadOp, invalidLead)
	h.New = func(t *testing.T) adaptertest.Setup {
		a, srv := setup(t, sb.Options{}, amocrm.Config{KeyFieldID: -1})
		return adaptertest.Setup{Adapter: a, Sandbox: srv}
	}
	adaptertest.Run(t, h)
}

// TestSearchLagIsTheSettleTime shows the window: a lost response, then a
// search inside the lag misses the lead; after SettleTime it is found, and
// only then is a re-execute safe.
func TestSearchLagIsTheSettleTime(t *testing.T) {
	t.Parallel()
	clk := newClock()
	a, srv := setup(t, sb.Options{Options: sandbox.Options{Clock: clk.now}, SearchLag: 20 * time.Second},
		amocrm.Config{SettleTime: 30 * time.Second, HTTPConfig: adapters.HTTPConfig{Clock: clk.now}})
	require.Equal(t, 30*time.Second, a.Capabilities().SettleTime)
	op := leadOp(adaptertest.Intent("lag"), 0)
	require.NoError(t, srv.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
	_, err := a.Execute(context.Background(), op)
	adaptertest.RequireClass(t, err, adapters.ReconcileBeforeRetry, "")
	require.Equal(t, 1, srv.Effects(op.Key.String()))

	lr, err := a.Lookup(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status, "inside the lag the search cannot see the lead: not a verdict before SettleTime")

	clk.advance(a.Capabilities().SettleTime)
	lr, err = a.Lookup(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	out, err := a.Execute(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, lr.Outcome.ObjectID, out.ObjectID)
	require.Equal(t, 1, srv.Effects(op.Key.String()))
}

func TestRateLimitIsRetry(t *testing.T) {
	t.Parallel()
	clk := newClock()
	a, srv := setup(t, sb.Options{Options: sandbox.Options{Clock: clk.now}, RatePerSec: 2}, amocrm.Config{HTTPConfig: adapters.HTTPConfig{Clock: clk.now}})
	_, err := a.Execute(context.Background(), leadOp(adaptertest.Intent("rate"), 0)) // search + create
	require.NoError(t, err)
	_, err = a.Execute(context.Background(), leadOp(adaptertest.Intent("rate"), 0))
	adaptertest.RequireClass(t, err, adapters.Retry, adapters.CodeHTTP429)
	require.Equal(t, 1, srv.TotalEffects())
	clk.advance(time.Second)
	_, err = a.Execute(context.Background(), leadOp(adaptertest.Intent("rate"), 0))
	require.NoError(t, err)
}

func TestTaskScanPageCapIsIndeterminate(t *testing.T) {
	t.Parallel()
	a, srv := setup(t, sb.Options{}, amocrm.Config{LookupScan: adapters.LookupScan{LookupMaxPages: 1}})
	ctx := context.Background()
	for i := range 250 {
		_, err := a.Execute(ctx, taskOp(fmt.Sprintf("fill-%d", i), 0))
		require.NoError(t, err)
	}
	require.Equal(t, 250, srv.TotalEffects())
	lr, err := a.Lookup(ctx, taskOp("absent", 0))
	require.NoError(t, err)
	require.Equal(t, adapters.Indeterminate, lr.Status)
	_, err = a.Execute(ctx, taskOp("absent", 0))
	adaptertest.RequireClass(t, err, adapters.ReconcileBeforeRetry, "")
	require.Equal(t, 250, srv.TotalEffects(), "no create without proof of absence")
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]amocrm.Config{
		"no_url":    {},
		"creds_url": {BaseURL: "https://u:p@x.amocrm.ru"},
		"neg_field": {BaseURL: "https://x.amocrm.ru", KeyFieldID: -1},
	} {
		require.ErrorIs(t, c.WithDefaults().Validate(), amocrm.ErrInvalidConfig, name)
	}
	require.Equal(t, 2*amocrm.DefaultTimeout, amocrm.Config{}.WithDefaults().SettleTime, "twice the timeout")
	require.Equal(t, amocrm.DefaultSettleTime, amocrm.Config{HTTPConfig: adapters.HTTPConfig{Timeout: time.Second}}.WithDefaults().SettleTime, "at least the search lag")
	_, err := amocrm.New(amocrm.Config{BaseURL: "https://x.amocrm.ru", HTTPConfig: adapters.HTTPConfig{Getenv: func(string) string { return "" }}})
	require.ErrorIs(t, err, adapters.ErrNoCredential)
}

// crmFront serves the emulator through a handler that runs before(r) and
// can hold the next POST until released.
type crmFront struct {
	url    string
	mu     sync.Mutex
	gate   chan struct{}
	held   chan struct{}
	before func(r *http.Request)
}

func newCRMFront(t *testing.T, srv *sb.Server) *crmFront {
	t.Helper()
	f := &crmFront{}
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		gate, held, before := f.gate, f.held, f.before
		if r.Method == http.MethodPost {
			f.gate = nil
		}
		f.mu.Unlock()
		if before != nil {
			before(r)
		}
		if gate != nil && r.Method == http.MethodPost {
			close(held)
			<-gate
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

func (f *crmFront) holdNextCreate() (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate, f.held = make(chan struct{}), make(chan struct{})
	gate := f.gate
	return f.held, func() { close(gate) }
}

func frontAdapter(t *testing.T, srv *sb.Server, url string) *amocrm.Adapter {
	t.Helper()
	a, err := amocrm.New(amocrm.Config{
		BaseURL:    url,
		Token:      adapters.Token{Value: redact.Secret(srv.Token())},
		KeyFieldID: srv.KeyFieldID(),
		SettleTime: -1,
		HTTPConfig: adapters.HTTPConfig{Timeout: 5 * time.Second, RateLimit: adapters.RateLimit{Rate: -1}},
	})
	require.NoError(t, err)
	return a
}

// postTasks creates n tasks straight in the emulator, in one batch.
func postTasks(t *testing.T, srv *sb.Server, n int) {
	t.Helper()
	batch := make([]map[string]any, n)
	for i := range batch {
		batch[i] = map[string]any{"text": "other task", "complete_till": 1800000000, "task_type_id": 1, "responsible_user_id": 5}
	}
	body, err := json.Marshal(batch)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/api/v4/tasks", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+srv.Token())
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
}

// Two owners of one key (a take-over while the first call was still held
// by the account) both create: amoCRM has no uniqueness. The retried
// attempt that lands last searches again and reports the duplicate, the
// oldest task staying the operation's; a lookup by key alone reports it too.
func TestRetriedCreateReportsDuplicates(t *testing.T) {
	t.Parallel()
	srv := sb.New(sb.Options{RatePerSec: -1})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	f := newCRMFront(t, srv)
	replicaA, replicaB := frontAdapter(t, srv, f.url), frontAdapter(t, srv, f.url)
	op := taskOp(adaptertest.Intent("twice"), 0)
	since := time.Now().Add(-time.Second)
	att := func(n int) context.Context {
		return adapters.WithAttempt(context.Background(), adapters.Attempt{Number: n, Since: since})
	}

	held, release := f.holdNextCreate()
	type result struct {
		out adapters.Outcome
		err error
	}
	late := make(chan result, 1)
	go func() {
		out, err := replicaA.Execute(att(2), op)
		late <- result{out, err}
	}()
	<-held
	b, err := replicaB.Execute(att(3), op)
	require.NoError(t, err)
	require.Empty(t, b.Duplicates)
	release()
	a := <-late
	require.NoError(t, a.err)
	require.Equal(t, 2, srv.Effects(op.Key.String()), "amoCRM made a second task")
	require.Equal(t, b.ObjectID, a.out.ObjectID, "the oldest task is the operation's")
	require.Len(t, a.out.Duplicates, 1)
	require.Equal(t, 1, a.out.Details["duplicates"])

	keyOnly := op
	keyOnly.Fields = nil
	lr, err := replicaB.Lookup(att(3), keyOnly)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, b.ObjectID, lr.Outcome.ObjectID)
	require.Equal(t, a.out.Duplicates, lr.Outcome.Duplicates)
	require.Equal(t, adapters.CodeDuplicateObjects, lr.Code)
}

// Task pages are numbered over a newest-first list: tasks created during a
// scan shift a task onto the next page too. It is one task, never a
// duplicate.
func TestTaskScanDuringCreationCountsOneTaskOnce(t *testing.T) {
	t.Parallel()
	srv := sb.New(sb.Options{RatePerSec: -1})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	f := newCRMFront(t, srv)
	a := frontAdapter(t, srv, f.url)
	op := taskOp(adaptertest.Intent("single"), 0)
	postTasks(t, srv, 10)
	out, err := a.Execute(adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 1}), op)
	require.NoError(t, err)
	postTasks(t, srv, 240)
	f.mu.Lock()
	f.before = func(r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("page") == "2" {
			postTasks(t, srv, 20)
		}
	}
	f.mu.Unlock()
	keyOnly := op
	keyOnly.Fields = nil
	lr, err := a.Lookup(context.Background(), keyOnly)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
	require.Empty(t, lr.Outcome.Duplicates, "one task reported as several")
	require.NotContains(t, lr.Outcome.Details, "duplicates")
	require.Equal(t, 1, srv.Effects(op.Key.String()))
}
