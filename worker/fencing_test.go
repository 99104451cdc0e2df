package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/worker"
)

// gated wraps a real adapter and holds its calls at a gate, so that a test
// can act while a call or a lookup is in flight. The target is still the
// emulator; the gate only decides when the answer comes back.
type gated struct {
	adapters.Adapter
	lookups, executes bool          // which calls wait at the gate
	entered           chan struct{} // closed when the first gated call arrived
	release           chan struct{} // close to let gated calls answer
	once              sync.Once
}

func gate(a adapters.Adapter, lookups, executes bool) *gated {
	return &gated{Adapter: a, lookups: lookups, executes: executes, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gated) wait() {
	g.once.Do(func() { close(g.entered) })
	<-g.release
}

func (g *gated) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	if g.lookups {
		g.wait()
	}
	return g.Adapter.Lookup(ctx, op)
}

// Execute answers only once the gate opens, after the target processed the
// request: the effect is in the ledger while the caller still waits.
func (g *gated) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	out, err := g.Adapter.Execute(ctx, op)
	if g.executes {
		g.wait()
	}
	return out, err
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// lostCharge charges once through the YooKassa emulator with the answer
// lost after the payment was taken, and records the attempt as unknown in
// the journal, as a worker would have. It returns the key.
func lostCharge(t *testing.T, b *bundle, sb interface{ InjectFault(sandbox.Fault) error }, a adapters.Adapter, intent string) string {
	t.Helper()
	ctx := context.Background()
	_, err := consumer.Ensure(ctx, b.js, b.ncfg) // the streams results go to
	require.NoError(t, err)
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
	body, err := json.Marshal(chargeCommand("evt-"+intent, intent))
	require.NoError(t, err)
	op, err := (&operation.Decoder{Env: "test"}).Decode(body)
	require.NoError(t, err)
	key := op.Key.String()
	c, err := journal.ClaimOne(ctx, b.store, journal.ClaimRequest{Key: key, OperationType: op.Type, RequestHash: op.Fingerprint,
		TargetSystem: op.TargetSystem, EventID: op.EventID, ApprovalID: op.ApprovalID, Owner: "gone", LeaseTTL: time.Minute})
	require.NoError(t, err)
	_, err = a.Execute(ctx, op)
	ae := adapters.AsError(err)
	require.Equal(t, adapters.ReconcileBeforeRetry, ae.Class, "the answer was lost: %v", err)
	require.NoError(t, journal.CompleteOne(ctx, b.store, journal.Completion{Key: key, Token: c.Token, Status: journal.StatusUnknown, ErrorCode: ae.Code}))
	return key
}

// counter reads one counter series from a registry.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// errorLines returns the ERROR lines of a JSON log.
func errorLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"level":"ERROR"`) {
			out = append(out, l)
		}
	}
	return out
}

// TestOperatorResolveWinsOverReconciler: a charge's answer was lost; the
// reconciler has taken the operation over and is looking it up when an
// operator, who saw the payment in the provider's dashboard, resolves it.
// The operator's decision wins (a new fencing token): the reconciler's late
// completion is refused and recorded as fenced, and the agent gets the
// operator's outcome as the command's result. One charge in the ledger.
func TestOperatorResolveWinsOverReconciler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startYooKassa(t)
	key := lostCharge(t, b, sb, a, "order-resolve")
	require.Equal(t, 1, sb.Effects(key), "the payment was taken")
	paid := sb.Ledger().Effects()[0].ObjectID

	var logs lockedBuffer
	reg := prometheus.NewRegistry()
	g := gate(a, true, false)
	rec, err := worker.NewReconciler(worker.ReconcilerConfig{}, worker.Config{Owner: "reconciler", LeaseTTL: time.Minute},
		worker.Deps{Store: b.store, JS: b.js, Adapters: map[string]adapters.Adapter{"payment.charge": g},
			Log: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: worker.NewMetrics(reg)})
	require.NoError(t, err)
	done := make(chan worker.Settled, 1)
	go func() {
		s, err := rec.RunOnce(context.Background())
		assert(t, err == nil, "reconcile pass: %v", err)
		done <- s
	}()
	waitClosed(t, g.entered, "the reconciler's lookup")
	held, err := b.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, "reconciler", held.LeaseOwner, "the reconciler holds the operation")

	resolved, err := worker.Resolve(context.Background(), worker.Deps{Store: b.store, JS: b.js}, journal.Resolution{Key: key,
		Status: journal.StatusSucceeded, TargetObjectID: paid, Evidence: "payment seen in the YooKassa dashboard", Operator: "alice"})
	require.NoError(t, err, "an operator's decision wins over the reconciler's lease")
	require.Greater(t, resolved.LeaseToken, held.LeaseToken)
	close(g.release)
	<-done

	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
	require.Equal(t, paid, r.TargetObjectID, "the resolved outcome is the result")
	final, err := b.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, journal.StatusSucceeded, final.Status)
	require.Equal(t, "alice", final.LeaseOwner)
	require.Equal(t, resolved.LeaseToken, final.LeaseToken, "the reconciler's late completion was refused")
	atts, err := b.store.Attempts(context.Background(), key)
	require.NoError(t, err)
	byKind := map[journal.AttemptKind]journal.Attempt{}
	for _, at := range atts {
		byKind[at.Kind] = at
		require.False(t, at.FinishedAt.IsZero(), "no attempt left open: %+v", at)
	}
	require.Equal(t, journal.OutcomeFenced, byKind["reconcile"].Outcome)
	require.Contains(t, byKind["reconcile"].Note, paid, "what the reconciler found is kept")
	require.Equal(t, journal.OutcomeSucceeded, byKind["operator"].Outcome)
	require.Equal(t, "alice", byKind["operator"].Worker)
	require.Equal(t, 1.0, counter(t, reg, "idemgate_completions_fenced_total", "by", "reconciler"))
	require.Empty(t, errorLines(logs.String()), "fencing is not an error")
	require.Equal(t, 1, sb.TotalEffects(), "one charge")
}

// TestRacingReconcilersAreNotAnError: reconciler A takes an unknown charge
// over and its lookup stalls past its lease; reconciler B takes it over,
// finds the payment and settles it. A's lookup then answers: its completion
// is refused by the fencing token — as designed, so no ERROR, a counter, and
// A's attempt closed as fenced.
func TestRacingReconcilersAreNotAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startYooKassa(t)
	key := lostCharge(t, b, sb, a, "order-race")

	var logsA lockedBuffer
	regA := prometheus.NewRegistry()
	g := gate(a, true, false)
	recA, err := worker.NewReconciler(worker.ReconcilerConfig{}, worker.Config{Owner: "reconciler-a", LeaseTTL: 200 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond, CallTimeout: 100 * time.Millisecond},
		worker.Deps{Store: b.store, JS: b.js, Adapters: map[string]adapters.Adapter{"payment.charge": g},
			Log: slog.New(slog.NewJSONHandler(&logsA, nil)), Metrics: worker.NewMetrics(regA)})
	require.NoError(t, err)
	recB, err := worker.NewReconciler(worker.ReconcilerConfig{}, worker.Config{Owner: "reconciler-b", LeaseTTL: time.Minute},
		worker.Deps{Store: b.store, JS: b.js, Adapters: map[string]adapters.Adapter{"payment.charge": a}})
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := recA.RunOnce(context.Background())
		done <- err
	}()
	waitClosed(t, g.entered, "reconciler A's lookup")
	waitFor(t, 30*time.Second, "B to take over and settle", func() (bool, string) {
		s, err := recB.RunOnce(context.Background())
		require.NoError(t, err)
		rec, err := b.store.Get(context.Background(), key)
		require.NoError(t, err)
		return s.Found == 1 && rec.Status == journal.StatusSucceeded, rec.LeaseOwner + " " + string(rec.Status)
	})
	close(g.release)
	require.NoError(t, <-done, "a fenced-off completion is not a failed pass")

	require.Empty(t, errorLines(logsA.String()), "fencing is not an error")
	require.Contains(t, logsA.String(), "reconcile fenced off")
	require.Equal(t, 1.0, counter(t, regA, "idemgate_completions_fenced_total", "by", "reconciler"))
	atts, err := b.store.Attempts(context.Background(), key)
	require.NoError(t, err)
	outcomes := map[string]journal.AttemptOutcome{}
	for _, at := range atts {
		outcomes[at.Worker] = at.Outcome
	}
	require.Equal(t, journal.OutcomeFenced, outcomes["reconciler-a"], "%+v", atts)
	require.Equal(t, journal.OutcomeSucceeded, outcomes["reconciler-b"], "%+v", atts)
	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status)
	require.Equal(t, 1, sb.TotalEffects())
}

// TestForcedResolveFencesTheLiveCall: an operator may not resolve an
// operation whose call is in flight, unless forced; a forced decision wins,
// and the call that comes back afterwards is refused, its attempt closed as
// fenced with what the target answered — here, that the payment was taken,
// which the operator must now see.
func TestForcedResolveFencesTheLiveCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startYooKassa(t)
	g := gate(a, false, true)
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second, HeartbeatInterval: time.Second,
		Retry: worker.RetryPolicy{InLease: 2 * time.Second}}, map[string]adapters.Adapter{"payment.charge": g})
	const key = "test:payment.charge:order-forced:v1"
	b.publishCommand(t, chargeCommand("evt-forced", "order-forced"))
	waitClosed(t, g.entered, "the call to reach the target")
	require.Equal(t, 1, sb.Effects(key))
	paid := sb.Ledger().Effects()[0].ObjectID

	decision := journal.Resolution{Key: key, Status: journal.StatusFailedFinal, ErrorCode: "operator_resolved",
		Evidence: "customer cancelled the order", Operator: "alice"}
	_, err := worker.Resolve(context.Background(), worker.Deps{Store: b.store, JS: b.js}, decision)
	require.ErrorIs(t, err, journal.ErrLeaseHeld, "never over a live call without saying so")
	decision.Force = true
	_, err = worker.Resolve(context.Background(), worker.Deps{Store: b.store, JS: b.js}, decision)
	require.NoError(t, err)
	close(g.release)

	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultFailedFinal, r.Status, "the operator's decision is the result: %+v", r)
	waitFor(t, 30*time.Second, "the call's attempt to be closed", func() (bool, string) {
		return executes(t, b.store, key)[0].Outcome == journal.OutcomeFenced, trail(t, b.store, key)
	})
	exec := executes(t, b.store, key)[0]
	require.Contains(t, exec.Note, "succeeded", "the trail keeps what the call found")
	require.Contains(t, exec.Note, paid)
	atts, err := b.store.Attempts(context.Background(), key)
	require.NoError(t, err)
	require.Contains(t, atts[len(atts)-1].Note, "forced over the live execute of w1")
	require.Equal(t, 1, sb.TotalEffects())
}

// assert reports a failure from a goroutine without FailNow.
func assert(t *testing.T, ok bool, format string, args ...any) {
	if !ok {
		t.Errorf(format, args...)
	}
}

// together holds each lookup until n have arrived (or a while has passed)
// and records how many ran at once.
type together struct {
	adapters.Adapter
	n        int32
	in, peak atomic.Int32
	all      chan struct{}
	once     sync.Once
}

func (g *together) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	cur := g.in.Add(1)
	defer g.in.Add(-1)
	for p := g.peak.Load(); cur > p && !g.peak.CompareAndSwap(p, cur); p = g.peak.Load() {
	}
	if cur == g.n {
		g.once.Do(func() { close(g.all) })
	}
	select {
	case <-g.all:
	case <-time.After(5 * time.Second): // one at a time: the peak stays 1
	}
	return g.Adapter.Lookup(ctx, op)
}

// TestReconcilerLooksUpABatchConcurrently: the lookups of one reconciler
// pass run at once (bounded by max_in_flight), not one after another: each
// of three unknown charges is held at the target until all three lookups
// have arrived.
func TestReconcilerLooksUpABatchConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startYooKassa(t)
	keys := []string{lostCharge(t, b, sb, a, "order-batch-1"), lostCharge(t, b, sb, a, "order-batch-2"), lostCharge(t, b, sb, a, "order-batch-3")}
	g := &together{Adapter: a, n: 3, all: make(chan struct{})}
	rec, err := worker.NewReconciler(worker.ReconcilerConfig{}, worker.Config{Owner: "reconciler", LeaseTTL: time.Minute},
		worker.Deps{Store: b.store, JS: b.js, Adapters: map[string]adapters.Adapter{"payment.charge": g}})
	require.NoError(t, err)
	s, err := rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, s.Found)
	require.Equal(t, int32(3), g.peak.Load(), "the three lookups ran at once")
	for _, key := range keys {
		r, err := b.store.Get(context.Background(), key)
		require.NoError(t, err)
		require.Equal(t, journal.StatusSucceeded, r.Status, key)
	}
	require.Equal(t, 3, sb.TotalEffects())
}
