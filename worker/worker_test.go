package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

// target is a test-only target with a native idempotency key: it keeps one
// object per key and counts real effects, with faults on demand. (The sandbox
// emulators play this part in the end-to-end suites.)
type target struct {
	mu        sync.Mutex
	objects   map[string]string // key → object id
	effects   map[string]int
	calls     map[string]int
	lookups   int
	faults    []func(op operation.Operation) error // consumed in order, before the effect
	lostNext  int                                  // responses lost after commit
	lookupErr []error                              // consumed in order by Lookup
	block     chan struct{}                        // when set, Execute waits on it after committing
	delay     time.Duration
}

func newTarget() *target {
	return &target{objects: map[string]string{}, effects: map[string]int{}, calls: map[string]int{}}
}

func (t *target) Name() string         { return "testtarget" }
func (t *target) TargetSystem() string { return "payments" }
func (t *target) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{NativeKey: true, Lookup: true, MaxKeyLen: 255}
}

func (t *target) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	key := op.Key.String()
	t.mu.Lock()
	t.calls[key]++
	if len(t.faults) > 0 {
		f := t.faults[0]
		t.faults = t.faults[1:]
		if err := f(op); err != nil {
			t.mu.Unlock()
			return adapters.Outcome{}, err
		}
	}
	id, ok := t.objects[key]
	if !ok {
		id = fmt.Sprintf("obj-%d", len(t.objects)+1)
		t.objects[key] = id
		t.effects[key]++
	}
	lost := t.lostNext > 0
	if lost {
		t.lostNext--
	}
	block, delay := t.block, t.delay
	t.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return adapters.Outcome{}, adapters.NewError(adapters.CodeTimeoutAfterRequestSent, adapters.ReconcileBeforeRetry, ctx.Err())
		}
	}
	if block != nil {
		<-block
	}
	if lost {
		return adapters.Outcome{}, adapters.NewError(adapters.CodeTimeoutAfterRequestSent, adapters.ReconcileBeforeRetry, nil)
	}
	return adapters.Outcome{ObjectID: id, BusinessStatus: "succeeded", RequestID: "rq-" + id,
		Details: map[string]any{"card_token": "tok_canary_secret", "payer": "card 5500 0055 5555 5559 paid",
			"authorization": "Bearer canary-bearer-token"}}, nil
}

func (t *target) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lookups++
	if len(t.lookupErr) > 0 {
		err := t.lookupErr[0]
		t.lookupErr = t.lookupErr[1:]
		return adapters.LookupResult{}, err
	}
	if id, ok := t.objects[op.Key.String()]; ok {
		return adapters.LookupResult{Status: adapters.Found, Outcome: adapters.Outcome{ObjectID: id, BusinessStatus: "succeeded"}}, nil
	}
	return adapters.LookupResult{Status: adapters.NotFound}, nil
}

func (t *target) count(key string) (effects, calls int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.effects[key], t.calls[key]
}

func (t *target) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.effects {
		n += e
	}
	return n
}

// requireOneCallPerKey asserts that each key was executed exactly once and
// nothing else was executed. The target keeps one object per key, so a
// second Execute of a key adds no effect: only the call count shows it.
func (t *target) requireOneCallPerKey(tb testing.TB, keys map[string]bool) {
	tb.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	for key := range keys {
		require.Equal(tb, 1, t.calls[key], "Execute calls for %s", key)
		require.Equal(tb, 1, t.effects[key], "effects for %s", key)
	}
	require.Len(tb, t.calls, len(keys), "keys executed")
}

type bundle struct {
	ns      *natstest.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	store   journal.Store
	target  *target
	ncfg    consumer.Config
	results chan operation.Result
	// metrics, when set, are the workers' (default: unregistered ones).
	metrics *worker.Metrics
	// approvals, when set, gate the workers' intents.
	approvals *worker.Approvals
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	b := &bundle{ns: ns, nc: nc, js: js, store: pgtest.Store(t), target: newTarget(), results: make(chan operation.Result, 10000)}
	b.ncfg = consumer.Config{AckWait: 5 * time.Second, FetchWait: 100 * time.Millisecond}.WithDefaults()
	sub, err := nc.Subscribe(wire.ResultPrefix+">", func(m *nats.Msg) {
		var r operation.Result
		if err := json.Unmarshal(m.Data, &r); err == nil {
			b.results <- r
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return b
}

func (b *bundle) worker(t *testing.T, owner string, cfg worker.Config) *worker.Worker {
	return b.workerWithLog(t, owner, cfg, nil)
}

func (b *bundle) workerWithLog(t *testing.T, owner string, cfg worker.Config, log *slog.Logger) *worker.Worker {
	t.Helper()
	ctx := context.Background()
	cons, err := consumer.Ensure(ctx, b.js, b.ncfg)
	require.NoError(t, err)
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 3 * time.Second
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 2 * time.Second
	}
	if cfg.Retry.InLease == 0 {
		cfg.Retry.InLease = 2 * time.Second
	}
	if cfg.Retry.InitialDelay == 0 {
		cfg.Retry.InitialDelay = 20 * time.Millisecond
		cfg.Retry.MaxDelay = 100 * time.Millisecond
	}
	cfg.Owner = owner
	w, err := worker.New(cfg, b.ncfg, worker.Deps{
		Store: b.store, JS: b.js, NC: b.nc, Consumer: cons,
		Decoder:  &operation.Decoder{Env: "test"},
		Adapters: map[string]adapters.Adapter{"payment.charge": b.target, "invoice.create": b.target},
		Log:      log, Metrics: b.metrics, Approvals: b.approvals,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)
	return w
}

func charge(event, order string, amount int) []byte {
	return []byte(fmt.Sprintf(`{"event_id":%q,"operation":"payment.charge","approval_id":"appr-1",
		"payload":{"account_id":"merchant-account-17","order_id":%q,"amount_minor":%d,"currency":"rub"}}`, event, order, amount))
}

func (b *bundle) publish(t *testing.T, body []byte) {
	t.Helper()
	_, err := b.js.Publish(context.Background(), wire.CommandSubject("payment.charge"), body)
	require.NoError(t, err)
}

// await collects results until n final ones (not pending) arrived for key.
func (b *bundle) await(t *testing.T, key string, n int) []operation.Result {
	t.Helper()
	var got []operation.Result
	deadline := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case r := <-b.results:
			if r.OperationKey == key && r.Status != operation.ResultPending {
				got = append(got, r)
			}
		case <-deadline:
			t.Fatalf("got %d of %d final results for %s: %+v", len(got), n, key, got)
		}
	}
	return got
}

func TestSameCommandDeliveredFiveTimesHasOneEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(t, "w1", worker.Config{})
	const key = "test:payment.charge:evt-5x:v1"
	for range 5 {
		b.publish(t, charge("evt-5x", "order-1", 125000))
	}
	res := b.await(t, key, 5)
	replayed := 0
	for _, r := range res {
		require.Equal(t, operation.ResultSucceeded, r.Status)
		require.Equal(t, res[0].TargetObjectID, r.TargetObjectID)
		require.NotEmpty(t, r.TargetObjectID)
		if r.Replayed {
			replayed++
		}
	}
	require.Equal(t, 4, replayed)
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls)
	rec, err := b.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, journal.StatusSucceeded, rec.Status)
}

func TestTwoWorkersWithDuplicatesEffectsEqualDistinctKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(t, "w1", worker.Config{})
	b.worker(t, "w2", worker.Config{})
	const distinct = 200
	sent := 0
	for i := range distinct {
		b.publish(t, charge(fmt.Sprintf("evt-%d", i), fmt.Sprintf("order-%d", i), 1000+i))
		sent++
		if i%5 == 0 { // 20 % duplicates
			b.publish(t, charge(fmt.Sprintf("evt-%d", i), fmt.Sprintf("order-%d", i), 1000+i))
			sent++
		}
	}
	finals := map[string]int{}
	deadline := time.After(60 * time.Second)
	for n := 0; n < sent; {
		select {
		case r := <-b.results:
			if r.Status == operation.ResultPending {
				continue
			}
			require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
			finals[r.OperationKey]++
			n++
		case <-deadline:
			t.Fatalf("only %d final results", len(finals))
		}
	}
	require.Len(t, finals, distinct)
	require.Equal(t, distinct, b.target.total(), "effects in the target = distinct keys")
	keys := map[string]bool{}
	for i := range distinct {
		keys[fmt.Sprintf("test:payment.charge:evt-%d:v1", i)] = true
	}
	b.target.requireOneCallPerKey(t, keys)
}

func TestSameKeyOtherPayloadConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(t, "w1", worker.Config{})
	const key = "test:payment.charge:evt-c:v1"
	b.publish(t, charge("evt-c", "order-1", 100))
	first := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, first.Status)
	b.publish(t, charge("evt-c", "order-1", 999))
	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultConflict, r.Status)
	require.Equal(t, adapters.CodeKeyPayloadMismatch, r.ErrorCode)
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls, "a conflict calls nothing")
}

func TestPoisonMessagesRejectedOnceAndDaemonServes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.worker(t, "w1", worker.Config{})
	_ = w
	poison := map[string][]byte{
		"not json":          []byte(`{"event_id":`),
		"unknown operation": []byte(`{"event_id":"evt-p1","operation":"payment.teleport","payload":{}}`),
		"missing field":     []byte(`{"event_id":"evt-p2","operation":"payment.charge","approval_id":"a","payload":{"account_id":"a","order_id":"o","currency":"RUB"}}`),
		"card in key":       []byte(`{"event_id":"4111111111111111","operation":"payment.charge","approval_id":"a","payload":{"account_id":"a","order_id":"o","amount_minor":1,"currency":"RUB"}}`),
		"too large":         []byte(`{"event_id":"evt-p3","operation":"payment.charge","payload":{"x":"` + string(make([]byte, 70<<10)) + `"}}`),
	}
	for _, body := range poison {
		b.publish(t, body)
	}
	// A rejected result where a key could be derived.
	r := b.await(t, "test:payment.charge:evt-p2:v1", 1)[0]
	require.Equal(t, operation.ResultRejected, r.Status)
	require.Equal(t, string(operation.CodeMissingField), r.ErrorCode)
	// The daemon keeps serving.
	b.publish(t, charge("evt-ok", "order-ok", 5))
	require.Equal(t, operation.ResultSucceeded, b.await(t, "test:payment.charge:evt-ok:v1", 1)[0].Status)
	// Every poison message was terminated after one delivery: none pending.
	require.Eventually(t, func() bool {
		info, err := b.js.Consumer(context.Background(), b.ncfg.CommandsStream, b.ncfg.Durable)
		if err != nil {
			return false
		}
		ci, err := info.Info(context.Background())
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0 && ci.NumRedelivered == 0
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, b.target.total())
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(t, "w1", worker.Config{})

	// never_retry: one call, failed_final.
	b.target.mu.Lock()
	b.target.faults = append(b.target.faults, func(operation.Operation) error {
		return adapters.NewError(adapters.CodeValidation, adapters.NeverRetry, nil)
	})
	b.target.mu.Unlock()
	b.publish(t, charge("evt-v", "o", 1))
	r := b.await(t, "test:payment.charge:evt-v:v1", 1)[0]
	require.Equal(t, operation.ResultFailedFinal, r.Status)
	require.Equal(t, adapters.CodeValidation, r.ErrorCode)
	effects, calls := b.target.count("test:payment.charge:evt-v:v1")
	require.Equal(t, 0, effects)
	require.Equal(t, 1, calls)

	// 503 twice, then success: retried with backoff as new attempts, one effect.
	b.target.mu.Lock()
	for range 2 {
		b.target.faults = append(b.target.faults, func(operation.Operation) error {
			return &adapters.Error{Code: adapters.CodeHTTP503, Class: adapters.Retry}
		})
	}
	b.target.mu.Unlock()
	b.publish(t, charge("evt-503", "o", 1))
	r = b.await(t, "test:payment.charge:evt-503:v1", 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status)
	require.Equal(t, 3, r.Attempts)
	effects, calls = b.target.count("test:payment.charge:evt-503:v1")
	require.Equal(t, 1, effects)
	require.Equal(t, 3, calls)
	att, err := b.store.Attempts(context.Background(), "test:payment.charge:evt-503:v1")
	require.NoError(t, err)
	require.Len(t, att, 3)
	require.Equal(t, adapters.CodeHTTP503, att[0].ErrorCode)
	require.Equal(t, journal.OutcomeFailedRetryable, att[0].Outcome)
	require.Equal(t, journal.OutcomeSucceeded, att[2].Outcome)

	// Timeout after the request was sent: unknown, reconciled by lookup,
	// never a second call.
	b.target.mu.Lock()
	b.target.lostNext = 1
	b.target.mu.Unlock()
	b.publish(t, charge("evt-lost", "o", 1))
	r = b.await(t, "test:payment.charge:evt-lost:v1", 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status)
	effects, calls = b.target.count("test:payment.charge:evt-lost:v1")
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls, "an unknown outcome is looked up, not re-sent")
	att, err = b.store.Attempts(context.Background(), "test:payment.charge:evt-lost:v1")
	require.NoError(t, err)
	require.Equal(t, journal.OutcomeUnknown, att[0].Outcome)
	require.Equal(t, journal.KindReconcile, att[len(att)-1].Kind)
}

// frozenStore is the journal of a worker process that dies: every write after
// freeze blocks forever, as if the process had stopped between the call and
// recording its outcome.
type frozenStore struct {
	journal.Store
	frozen  chan struct{}
	release chan struct{} // closed when the test ends: the "dead" process is reaped
}

func (f *frozenStore) Complete(ctx context.Context, cs []journal.Completion) ([]error, error) {
	select {
	case <-f.frozen:
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.release:
			return nil, errors.New("process reaped")
		}
	default:
	}
	return f.Store.Complete(ctx, cs)
}

func TestWorkerDiesBetweenCallAndCompleteNoSecondEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Worker A: its journal freezes once the target has committed.
	frozen := make(chan struct{})
	cons, err := consumer.Ensure(context.Background(), b.js, b.ncfg)
	require.NoError(t, err)
	ncA, err := nats.Connect(b.ns.URL())
	require.NoError(t, err)
	jsA, err := jetstream.New(ncA)
	require.NoError(t, err)
	consA, err := jsA.Consumer(context.Background(), b.ncfg.CommandsStream, b.ncfg.Durable)
	require.NoError(t, err)
	_ = cons
	release := make(chan struct{})
	wA, err := worker.New(worker.Config{Owner: "A", LeaseTTL: time.Second, CallTimeout: 500 * time.Millisecond,
		ShutdownTimeout: 100 * time.Millisecond, Retry: worker.RetryPolicy{InLease: time.Second}},
		b.ncfg, worker.Deps{Store: &frozenStore{Store: b.store, frozen: frozen, release: release}, JS: jsA, NC: ncA, Consumer: consA,
			Decoder: &operation.Decoder{Env: "test"}, Adapters: map[string]adapters.Adapter{"payment.charge": b.target}})
	require.NoError(t, err)
	close(frozen)
	require.NoError(t, wA.Start(context.Background()))
	const key = "test:payment.charge:evt-kill:v1"
	b.publish(t, charge("evt-kill", "o", 1))
	require.Eventually(t, func() bool { e, _ := b.target.count(key); return e == 1 }, 10*time.Second, 10*time.Millisecond)
	// A "dies": its connection goes away without acking.
	ncA.Close()
	stopped := make(chan struct{})
	go func() { wA.Stop(); close(stopped) }()
	t.Cleanup(func() { close(release); <-stopped })
	// B takes over after the lease and AckWait expire, looks up, finds it.
	b.worker(t, "B", worker.Config{LeaseTTL: time.Second, CallTimeout: 500 * time.Millisecond, Retry: worker.RetryPolicy{InLease: time.Second}})
	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status)
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls)
	rec, err := b.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, "obj-1", rec.TargetObjectID)
	atts, err := b.store.Attempts(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, "A", atts[0].Worker)
	require.Equal(t, journal.OutcomeAbandoned, atts[0].Outcome, "the dead worker's attempt is closed at the take-over")
	require.True(t, rec.EffectPossible, "its call may have landed")
}

func TestShutdownMidFlightLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.target.delay = 300 * time.Millisecond
	w1 := b.worker(t, "w1", worker.Config{})
	const n = 30
	for i := range n {
		b.publish(t, charge(fmt.Sprintf("evt-s%d", i), "o", 1+i))
	}
	// Stop while calls are in flight.
	require.Eventually(t, func() bool {
		b.target.mu.Lock()
		defer b.target.mu.Unlock()
		return len(b.target.calls) > 0
	}, 10*time.Second, time.Millisecond)
	w1.Stop()
	b.target.mu.Lock()
	b.target.delay = 0
	b.target.mu.Unlock()
	b.worker(t, "w2", worker.Config{})
	seen := map[string]bool{}
	deadline := time.After(60 * time.Second)
	for len(seen) < n {
		select {
		case r := <-b.results:
			if r.Status == operation.ResultSucceeded {
				seen[r.OperationKey] = true
			}
		case <-deadline:
			t.Fatalf("only %d of %d operations finished after a restart", len(seen), n)
		}
	}
	require.Equal(t, n, b.target.total(), "one effect per command, none lost")
	keys := map[string]bool{}
	for i := range n {
		keys[fmt.Sprintf("test:payment.charge:evt-s%d:v1", i)] = true
	}
	require.Equal(t, keys, seen)
	b.target.requireOneCallPerKey(t, keys)
}

// TestCanarySecretsLeakNowhere plants card numbers and tokens in commands
// and in the target's response, and looks for them in the journal, the
// published results and the worker's own logs (captured raw, with no
// redacting handler in between). A card number in a description (a field
// that is not declared free text) is refused, naming the field.
func TestCanarySecretsLeakNowhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs lockedBuffer
	b.workerWithLog(t, "w1", worker.Config{}, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	canaries := []string{"4111111111111111", "4111 1111 1111 1111", "5500 0055 5555 5559", "tok_canary_secret", "canary-bearer-token"}
	body := `{"event_id":"evt-canary","operation":"invoice.create","payload":{"order_id":"order-1","customer_id":"c-1",
		"amount_minor":100,"currency":"RUB","description":"pay by invoice"}}`
	_, err := b.js.Publish(context.Background(), wire.CommandSubject("invoice.create"), []byte(body))
	require.NoError(t, err)
	_, err = b.js.Publish(context.Background(), wire.CommandSubject("invoice.create"),
		[]byte(`{"event_id":"evt-canary-3","operation":"invoice.create","payload":{"order_id":"order-3","customer_id":"c-1",
		"amount_minor":100,"currency":"RUB","description":"pay with card 4111 1111 1111 1111 cvv 123"}}`))
	require.NoError(t, err)
	// A poison command carrying a card number in a field the decoder refuses.
	_, err = b.js.Publish(context.Background(), wire.CommandSubject("invoice.create"),
		[]byte(`{"event_id":"evt-canary-2","operation":"invoice.create","payload":{"card":"4111111111111111"}}`))
	require.NoError(t, err)
	var published []string
	deadline := time.After(30 * time.Second)
	for len(published) < 3 {
		select {
		case r := <-b.results:
			if r.Status == operation.ResultPending {
				continue
			}
			if r.EventID == "evt-canary-3" {
				require.Equal(t, operation.ResultRejected, r.Status)
				require.Contains(t, r.Reason, "payload.description: contains a card-like number")
			}
			raw, _ := json.Marshal(r)
			published = append(published, string(raw))
		case <-deadline:
			t.Fatalf("results: %v", published)
		}
	}
	rec, err := b.store.Get(context.Background(), "test:invoice.create:evt-canary:v1")
	require.NoError(t, err)
	require.Equal(t, journal.StatusSucceeded, rec.Status)
	row, _ := json.Marshal(rec)
	atts, err := b.store.Attempts(context.Background(), rec.Key)
	require.NoError(t, err)
	trail, _ := json.Marshal(atts)
	for _, c := range canaries {
		require.NotContains(t, string(row), c, "journal row")
		require.NotContains(t, string(trail), c, "attempts trail")
		for _, p := range published {
			require.NotContains(t, p, c, "published result")
		}
		require.NotContains(t, logs.String(), c, "worker logs")
	}
	require.Contains(t, string(rec.Result), "5500 00** **** 5559", "a masked card keeps its first six and last four digits")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPlainNATSPublishInterop: a command published the way `nats pub
// idemgate.cmd.… --header Nats-Msg-Id:…` does it (a core NATS publish with
// one header) is processed like any other, and the header de-duplicates.
func TestPlainNATSPublishInterop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(t, "w1", worker.Config{})
	_, err := consumer.Ensure(context.Background(), b.js, b.ncfg)
	require.NoError(t, err)
	for range 2 {
		m := nats.NewMsg("idemgate.cmd.payment.charge")
		m.Header.Set("Nats-Msg-Id", "evt-cli")
		m.Data = charge("evt-cli", "order-cli", 700)
		require.NoError(t, b.nc.PublishMsg(m))
	}
	require.NoError(t, b.nc.Flush())
	r := b.await(t, "test:payment.charge:evt-cli:v1", 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status)
	effects, calls := b.target.count("test:payment.charge:evt-cli:v1")
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls)
	info, err := b.js.Stream(context.Background(), b.ncfg.CommandsStream)
	require.NoError(t, err)
	si, err := info.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, si.State.Msgs, "the second publish was a JetStream duplicate")
}

// TestUnroutedOperationIsLeftInJetStream: a valid command for an operation
// this replica has no adapter for is a deployment error, not bad input: it is
// neither rejected nor terminated, but left for a replica that can serve it.
func TestUnroutedOperationIsLeftInJetStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(t, "w1", worker.Config{})
	_, err := b.js.Publish(context.Background(), wire.CommandSubject("crm.task.create"),
		[]byte(`{"event_id":"evt-unrouted","operation":"crm.task.create","payload":{"title":"call","responsible_id":"7"}}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := b.js.Consumer(context.Background(), b.ncfg.CommandsStream, b.ncfg.Durable)
		if err != nil {
			return false
		}
		ci, err := c.Info(context.Background())
		return err == nil && ci.Delivered.Consumer >= 1 && ci.NumAckPending == 1
	}, 10*time.Second, 20*time.Millisecond, "delivered once and held, not acked or terminated")
	select {
	case r := <-b.results:
		t.Fatalf("no result expected for an unrouted command, got %+v", r)
	default:
	}
	_, err = b.store.Get(context.Background(), "test:crm.task.create:evt-unrouted:v1")
	require.ErrorIs(t, err, journal.ErrNotFound, "nothing claimed")
	require.Zero(t, b.target.total())
}

// TestReconcilerReportsIdleRetryable: a retryable failure whose command no
// longer comes back is reported for the agent to resend, never dropped.
func TestReconcilerReportsIdleRetryable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c, err := journal.ClaimOne(ctx, b.store, journal.ClaimRequest{Key: "test:payment.charge:evt-idle:v1", OperationType: "payment.charge",
		RequestHash: "h", TargetSystem: "payments", Owner: "gone", LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(ctx, b.store, journal.Completion{Key: "test:payment.charge:evt-idle:v1", Token: c.Token,
		Status: journal.StatusFailedRetryable, ErrorCode: adapters.CodeHTTP503}))
	reg := prometheus.NewRegistry()
	unresolved := func(kind string) float64 {
		return series(t, reg, "idemgate_operations_unresolved", map[string]string{"kind": kind})
	}
	r, err := worker.NewReconciler(worker.ReconcilerConfig{IdleAfter: time.Millisecond}, worker.Config{Owner: "rec"},
		worker.Deps{Store: b.store, Adapters: map[string]adapters.Adapter{"payment.charge": b.target}, Metrics: worker.NewMetrics(reg)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := r.RunOnce(ctx)
		return err == nil && s.IdleRetryable == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1.0, unresolved("idle_retry"), "idemgate_operations_unresolved{kind=\"idle_retry\"} counts it")
	require.Zero(t, unresolved("unknown"))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		require.NotEqual(t, "idemgate_operations_retry_idle", mf.GetName(), "one metric of the unresolved, by kind")
		if mf.GetName() == "idemgate_operations_unresolved" {
			require.Len(t, mf.GetMetric(), 2, "both kinds exported, the empty one as 0")
		}
	}
	rec, err := b.store.Get(ctx, "test:payment.charge:evt-idle:v1")
	require.NoError(t, err)
	require.Equal(t, journal.StatusFailedRetryable, rec.Status, "reported, not changed")
	require.Zero(t, b.target.total())
}
