package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sbbitrix24 "github.com/idemgate/idemgate/sandbox/bitrix24"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

// The tests in this file drive the worker against the sandbox emulators
// through the real adapters, and count effects in the emulators' ledgers.

// startBitrix24 starts a Bitrix24 emulator without its leaky bucket (the
// tests inject the throttling they need) and returns it with an adapter.
func startBitrix24(t *testing.T, timeout time.Duration) (*sbbitrix24.Server, adapters.Adapter) {
	t.Helper()
	sb := sbbitrix24.New(sbbitrix24.Options{Bucket: -1, Options: sandbox.Options{MaxHang: 10 * time.Second}})
	_, err := sb.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	uid, code := sb.Credentials()
	a, err := bitrix24.New(bitrix24.Config{PortalURL: sb.URL(), UserID: uid, WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)}, HTTPConfig: adapters.HTTPConfig{Timeout: timeout}})
	require.NoError(t, err)
	return sb, a
}

// startYooKassa starts a YooKassa emulator and returns it with an adapter.
func startYooKassa(t *testing.T) (*sbyookassa.Server, adapters.Adapter) {
	t.Helper()
	sb := sbyookassa.New(sbyookassa.Options{Options: sandbox.Options{MaxHang: 10 * time.Second}})
	_, err := sb.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	shop, secret := sb.Credentials()
	a, err := yookassa.New(yookassa.Config{BaseURL: sb.URL(), ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}, HTTPConfig: adapters.HTTPConfig{Timeout: 5 * time.Second}})
	require.NoError(t, err)
	return sb, a
}

// workerFor starts a worker serving routes (operation type → adapter).
func (b *bundle) workerFor(t *testing.T, owner string, cfg worker.Config, routes map[string]adapters.Adapter) *worker.Worker {
	t.Helper()
	ctx := context.Background()
	cons, err := consumer.Ensure(ctx, b.js, b.ncfg)
	require.NoError(t, err)
	cfg.Owner = owner
	w, err := worker.New(cfg, b.ncfg, worker.Deps{
		Store: b.store, JS: b.js, NC: b.nc, Consumer: cons,
		Decoder: &operation.Decoder{Env: "test"}, Adapters: routes,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)
	return w
}

// publishCommand publishes a command as the nats CLI would: its event id is
// its Nats-Msg-Id, so copies of one intent differ only by event id.
func (b *bundle) publishCommand(t *testing.T, cmd operation.Command) {
	t.Helper()
	body, err := json.Marshal(cmd)
	require.NoError(t, err)
	_, err = b.js.Publish(context.Background(), wire.CommandSubject(cmd.Operation), body, jetstream.WithMsgID(cmd.EventID))
	require.NoError(t, err)
}

func taskCommand(event, intent string) operation.Command {
	return operation.Command{EventID: event, Operation: "crm.task.create", IntentID: intent,
		Payload: json.RawMessage(fmt.Sprintf(`{"title":"Call the customer back about %s","responsible_id":"7","customer_id":"42"}`, intent))}
}

func chargeCommand(event, intent string) operation.Command {
	return operation.Command{EventID: event, Operation: "payment.charge", IntentID: intent, ApprovalID: "appr-" + intent,
		Payload: json.RawMessage(fmt.Sprintf(`{"account_id":"merchant-account-17","order_id":%q,"amount_minor":125000,"currency":"rub"}`, intent))}
}

// executes returns the execute attempts of a key's trail.
func executes(t *testing.T, store journal.Store, key string) []journal.Attempt {
	t.Helper()
	atts, err := store.Attempts(context.Background(), key)
	require.NoError(t, err)
	var out []journal.Attempt
	for _, a := range atts {
		if a.Kind == "execute" {
			out = append(out, a)
		}
	}
	return out
}

// waitFor polls cond until it holds, failing with what it last saw.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last seen: %s", what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func trail(t *testing.T, store journal.Store, key string) string {
	t.Helper()
	atts, err := store.Attempts(context.Background(), key)
	require.NoError(t, err)
	s := ""
	for _, a := range atts {
		s += fmt.Sprintf(" [%d %s %s %s %s %s]", a.Attempt, a.Kind, a.Worker, a.StartedAt.Format("15:04:05.000"), a.Outcome, a.ErrorCode)
	}
	return s
}

// TestCopiesWaitOutTheBackoff: four copies of one intent (distinct
// Nats-Msg-Ids, as the nats CLI sends them) against Bitrix24 answering 503
// QUERY_LIMIT_EXCEEDED three times. Each copy arrives right after an attempt
// failed; it must wait for the backoff, not take an attempt of its own: four
// attempts spaced at least by the policy's minimum delays (on the database
// clock), one task in the target, succeeded.
func TestCopiesWaitOutTheBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startBitrix24(t, 2*time.Second)
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP503, Scope: sandbox.ScopeCreate, Count: 3}))
	policy := worker.RetryPolicy{MaxAttempts: 4, MaxElapsed: 30 * time.Second, InitialDelay: 600 * time.Millisecond, Multiplier: 2, MaxDelay: 4 * time.Second, InLease: 2 * time.Second}
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second, Retry: policy},
		map[string]adapters.Adapter{"crm.task.create": a})
	const key = "test:crm.task.create:task-copies:v1"

	b.publishCommand(t, taskCommand("evt-copy-1", "task-copies"))
	for k := 1; k <= 3; k++ {
		// A copy arrives just after attempt k failed.
		waitFor(t, 30*time.Second, fmt.Sprintf("attempt %d to fail", k), func() (bool, string) {
			ex := executes(t, b.store, key)
			return len(ex) >= k && ex[k-1].Outcome == journal.OutcomeFailedRetryable, trail(t, b.store, key)
		})
		b.publishCommand(t, taskCommand(fmt.Sprintf("evt-copy-%d", k+1), "task-copies"))
	}
	res := b.await(t, key, 4)
	for _, r := range res {
		require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
	}
	require.Equal(t, 1, sb.Effects(key), "one task in Bitrix24")
	ex := executes(t, b.store, key)
	t.Logf("trail:%s", trail(t, b.store, key))
	require.Len(t, ex, 4, "three 503s and the call that succeeded: %s", trail(t, b.store, key))
	for k := 1; k < len(ex); k++ {
		gap := ex[k].StartedAt.Sub(ex[k-1].StartedAt)
		lo, _ := policy.WithDefaults().Bounds(k)
		require.GreaterOrEqual(t, gap, lo, "attempt %d began %v after attempt %d; the policy waits at least %v: %s",
			k+1, gap, k, lo, trail(t, b.store, key))
	}
	rec, err := b.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, journal.StatusSucceeded, rec.Status)
	require.Equal(t, 4, rec.AttemptCount)
}

// TestNoFailedFinalWhileTheTargetMayHoldTheObject: a Bitrix24 add sits in
// the portal past the call timeout (the answer is lost; the task lands
// later), the first lookup finds nothing yet, and from then on the portal
// throttles every read (503 QUERY_LIMIT_EXCEEDED) until the retries run
// out. The operation may not end failed_final while the task may exist: it
// is looked up until the portal answers, and ends succeeded with the task
// that landed.
func TestNoFailedFinalWhileTheTargetMayHoldTheObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startBitrix24(t, 10*time.Second)
	const key = "test:crm.task.create:task-late:v1"
	// The add lands after 3 s, long after the 500 ms call timeout.
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Delay: 3 * time.Second, Count: 1}))
	// The first search (before the add) and the first lookup go through;
	// every read after them is throttled.
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Scope: sandbox.ScopeRead, Delay: time.Millisecond, Count: 2}))
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP503, Scope: sandbox.ScopeRead}))
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 500 * time.Millisecond,
		Retry: worker.RetryPolicy{MaxAttempts: 4, InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond, InLease: 2 * time.Second}},
		map[string]adapters.Adapter{"crm.task.create": a})

	b.publishCommand(t, taskCommand("evt-late", "task-late"))
	waitFor(t, 30*time.Second, "the late task to land", func() (bool, string) {
		return sb.Effects(key) == 1, trail(t, b.store, key)
	})
	sb.ClearFaults() // the throttling ends
	final := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, final.Status, "an object exists in the target: %+v %s", final, trail(t, b.store, key))
	eff := sb.Ledger().Effects()
	require.Len(t, eff, 1)
	require.Equal(t, eff[0].ObjectID, final.TargetObjectID)
	rec, err := b.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, journal.StatusSucceeded, rec.Status, trail(t, b.store, key))
}

// TestAmbiguousGatewayAnswerIsLookedUp: a connector drops the
// Idempotence-Key and its gateway answers 502 after YooKassa took the
// payment. A re-send would charge again (the key never reached YooKassa);
// the 502 is looked up by metadata.idemgate_key instead: N intents, N
// charges.
func TestAmbiguousGatewayAnswerIsLookedUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startYooKassa(t)
	const n = 5
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP502AfterCommit, DropKey: true, Count: n}))
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second,
		Retry: worker.RetryPolicy{InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond, InLease: 2 * time.Second}},
		map[string]adapters.Adapter{"payment.charge": a})
	for i := range n {
		b.publishCommand(t, chargeCommand(fmt.Sprintf("evt-gw-%d", i), fmt.Sprintf("order-gw-%d", i)))
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("test:payment.charge:order-gw-%d:v1", i)
	}
	for key, r := range b.awaitFirst(t, keys) {
		require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
		require.Equal(t, 1, sb.Effects(key), "one charge for %s: %s", key, trail(t, b.store, key))
		require.Equal(t, sb.Ledger().Effects()[seqOf(t, sb.Ledger().Effects(), key)].ObjectID, r.TargetObjectID)
		exec := executes(t, b.store, key)
		require.Len(t, exec, 1, "looked up, never re-sent: %s", trail(t, b.store, key))
		require.Equal(t, journal.OutcomeUnknown, exec[0].Outcome)
		require.Equal(t, adapters.CodeHTTP502, exec[0].ErrorCode)
	}
	require.Equal(t, n, sb.TotalEffects(), "N intents, N charges")
}

// seqOf returns the index of key's effect in effects.
func seqOf(t *testing.T, effects []sandbox.Effect, key string) int {
	t.Helper()
	for i, e := range effects {
		if e.Key == key {
			return i
		}
	}
	t.Fatalf("no effect for %s", key)
	return -1
}

// awaitFirst collects the first final result of each key.
func (b *bundle) awaitFirst(t *testing.T, keys []string) map[string]operation.Result {
	t.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	got := map[string]operation.Result{}
	deadline := time.After(60 * time.Second)
	for len(got) < len(keys) {
		select {
		case r := <-b.results:
			if _, seen := got[r.OperationKey]; want[r.OperationKey] && !seen && r.Status != operation.ResultPending {
				got[r.OperationKey] = r
			}
		case <-deadline:
			t.Fatalf("final results for %d of %d keys: %+v", len(got), len(keys), got)
		}
	}
	return got
}

// TestExhaustedAfterAnUnknownIsLookedUpFirst: YooKassa's first answer is a
// proxy's 500 (nothing was taken, but nobody can tell), the lookup finds
// nothing, and the retries that follow all get 503 until the budget is
// spent. Since an earlier outcome was unknown, the intent is looked up once
// more before it may end failed_final; it finds nothing and ends
// failed_final, with no charge in the ledger.
func TestExhaustedAfterAnUnknownIsLookedUpFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startYooKassa(t)
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 500, Body: "<html>500</html>"}))
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP503, Count: 3}))
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second,
		Retry: worker.RetryPolicy{MaxAttempts: 4, InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond, InLease: 2 * time.Second}},
		map[string]adapters.Adapter{"payment.charge": a})
	const key = "test:payment.charge:order-spent:v1"
	b.publishCommand(t, chargeCommand("evt-spent", "order-spent"))
	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultFailedFinal, r.Status, "%+v %s", r, trail(t, b.store, key))
	require.Equal(t, adapters.CodeHTTP503, r.ErrorCode)
	require.Zero(t, sb.TotalEffects())
	atts, err := b.store.Attempts(context.Background(), key)
	require.NoError(t, err)
	last := atts[len(atts)-1]
	exe := executes(t, b.store, key)
	lastExec := exe[len(exe)-1]
	require.Equal(t, 4, lastExec.Attempt, trail(t, b.store, key))
	require.Equal(t, journal.OutcomeUnknown, lastExec.Outcome, "the spent retries were looked up first: %s", trail(t, b.store, key))
	for _, a := range atts {
		if a.Token > lastExec.Token {
			require.Equal(t, journal.KindReconcile, a.Kind, "only lookups after the last call: %s", trail(t, b.store, key))
		}
	}
	require.Equal(t, journal.KindReconcile, last.Kind)
	require.Equal(t, journal.OutcomeFailedFinal, last.Outcome)
	require.Contains(t, last.Note, "not found by key after the retries ran out")
	// The final verdict came a call timeout after the last call ended: a
	// request of it that a target commits late is found, not contradicted.
	require.GreaterOrEqual(t, last.FinishedAt.Sub(lastExec.FinishedAt), 2*time.Second, trail(t, b.store, key))
	require.Len(t, executes(t, b.store, key), 4, "no attempt past max_attempts")
}

// TestClientRateLimitedLookupWaitsItsTurn: a lookup the adapter's own
// client-side rate limit holds back (client_rate_limited: nothing was sent)
// is not a lookup round that failed to settle the outcome. The operation
// stays unknown, held for the wait the limit asked for, with no round
// counted (it is never raised for an operator on that account), and the
// lookup once the limit has room settles it: one task in the target, the
// journal's object is the ledger's.
func TestClientRateLimitedLookupWaitsItsTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sb, free := startBitrix24(t, 5*time.Second)
	uid, code := sb.Credentials()
	// Two requests at once (a lookup's two searches), then one every 2 s:
	// once the bucket is empty, the next slot is past the 1 s call timeout.
	limited, err := bitrix24.New(bitrix24.Config{PortalURL: sb.URL(), UserID: uid, WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)},
		HTTPConfig: adapters.HTTPConfig{Timeout: time.Second, RateLimit: adapters.RateLimit{Rate: 0.5, Burst: 2}}})
	require.NoError(t, err)

	body, err := json.Marshal(taskCommand("evt-rl", "task-rl"))
	require.NoError(t, err)
	op, err := (&operation.Decoder{Env: "test"}).Decode(body)
	require.NoError(t, err)
	key := op.Key.String()
	// The first attempt's owner died after the add reached the portal.
	c, err := journal.ClaimOne(ctx, b.store, journal.ClaimRequest{Key: key, OperationType: op.Type, RequestHash: op.Fingerprint,
		TargetSystem: "crm", Owner: "gone", LeaseTTL: time.Minute})
	require.NoError(t, err)
	out, err := free.Execute(ctx, op)
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(ctx, b.store, journal.Completion{Key: key, Token: c.Token, Status: journal.StatusUnknown,
		ErrorCode: adapters.CodeTimeoutAfterRequestSent}))

	r, err := worker.NewReconciler(worker.ReconcilerConfig{}, worker.Config{Owner: "rec", CallTimeout: time.Second},
		worker.Deps{Store: b.store, Adapters: map[string]adapters.Adapter{op.Type: limited}})
	require.NoError(t, err)
	// Another operation's lookup on the account has just taken the
	// bucket's two slots.
	other, err := (&operation.Decoder{Env: "test"}).Decode(mustJSON(t, taskCommand("evt-rl-other", "task-rl-other")))
	require.NoError(t, err)
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = limited.Lookup(lctx, other)
	cancel()
	require.NoError(t, err)
	_, err = r.RunOnce(ctx)
	require.NoError(t, err)
	rec, err := b.store.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, journal.StatusUnknown, rec.Status, trail(t, b.store, key))
	require.Zero(t, rec.ReconcileRounds, "a lookup held back by the client's own limit is no round")
	require.Zero(t, rec.ReconcileRoundsTotal)
	atts, err := b.store.Attempts(ctx, key)
	require.NoError(t, err)
	last := atts[len(atts)-1]
	require.Equal(t, journal.OutcomeUnknown, last.Outcome)
	require.Contains(t, last.Note, "client-side rate limit", trail(t, b.store, key))
	require.True(t, rec.LeaseUntil.After(last.FinishedAt.Add(time.Second)), "held for the limit's wait, not retried at once")

	// Once the bucket has refilled (two slots in 4 s), the lookup runs.
	time.Sleep(4500 * time.Millisecond)
	waitFor(t, 30*time.Second, "the lookup to settle the task", func() (bool, string) {
		_, err := r.RunOnce(ctx)
		rec, gerr := b.store.Get(ctx, key)
		return err == nil && gerr == nil && rec.Status == journal.StatusSucceeded, trail(t, b.store, key)
	})
	rec, err = b.store.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, out.ObjectID, rec.TargetObjectID)
	require.Equal(t, 1, sb.Effects(key), "one task in the target")
	require.Zero(t, rec.ReconcileRoundsTotal, "no round was spent by the limit")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// stallingStore is the journal of a process that stands still (SIGSTOP, a
// long stall) right after its claim went out: the claim's answer reaches
// it stall later, when its lease may long have been taken over.
type stallingStore struct {
	journal.Store
	stall time.Duration
}

func (s *stallingStore) Claim(ctx context.Context, reqs []journal.ClaimRequest) ([]journal.Claim, error) {
	cs, err := s.Store.Claim(ctx, reqs)
	time.Sleep(s.stall)
	return cs, err
}

// TestStalledOwnerSendsNothingAfterItsLease: a worker stands still between
// its claim and its call for longer than its lease (the soak caught it: a
// replica stopped with a claim in flight). Meanwhile the reconciler takes
// the operation over, finds no payment and, the retry budget spent, ends it
// failed_final. The woken worker must not charge: its lease ran out on its
// own clock, so it sends nothing. The verdict and the ledger agree: no
// charge, failed_final.
func TestStalledOwnerSendsNothingAfterItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sb, a := startYooKassa(t)
	routes := map[string]adapters.Adapter{"payment.charge": a}
	cfg := worker.Config{LeaseTTL: time.Second, CallTimeout: 500 * time.Millisecond, Retry: worker.RetryPolicy{MaxAttempts: 1, InLease: time.Second}}
	cons, err := consumer.Ensure(ctx, b.js, b.ncfg)
	require.NoError(t, err)
	wcfg := cfg
	wcfg.Owner = "stalled"
	w, err := worker.New(wcfg, b.ncfg, worker.Deps{
		Store: &stallingStore{Store: b.store, stall: 3 * time.Second}, JS: b.js, NC: b.nc, Consumer: cons,
		Decoder: &operation.Decoder{Env: "test"}, Adapters: routes,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)
	rcfg := cfg
	rcfg.Owner = "rec"
	r, err := worker.NewReconciler(worker.ReconcilerConfig{Interval: 100 * time.Millisecond}, rcfg,
		worker.Deps{Store: b.store, JS: b.js, Adapters: routes})
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	t.Cleanup(r.Stop)

	const key = "test:payment.charge:order-stall:v1"
	b.publishCommand(t, chargeCommand("evt-stall", "order-stall"))
	res := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultFailedFinal, res.Status, "%+v %s", res, trail(t, b.store, key))
	// The stalled worker has woken (its claim answered 3 s in) and acted.
	time.Sleep(4 * time.Second)
	require.Zero(t, sb.TotalEffects(), "a charge after the failed_final verdict: %s", trail(t, b.store, key))
	rec, err := b.store.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, journal.StatusFailedFinal, rec.Status)
}

// TestLostAnswerLookedUpBeforeTheRetryDelay: the answer to a YooKassa
// charge is lost after the payment is made. The lookup that settles it
// comes as soon as the target's search can answer, not after the retry
// policy's delay (two minutes here, past the wait for the result): one
// read ends the uncertainty, and only a second call would need the delay.
// The charge is found, not made again.
func TestLostAnswerLookedUpBeforeTheRetryDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startYooKassa(t)
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second,
		Retry: worker.RetryPolicy{MaxAttempts: 4, InitialDelay: 2 * time.Minute, MaxDelay: 2 * time.Minute, MaxElapsed: 10 * time.Minute, InLease: 2 * time.Second}},
		map[string]adapters.Adapter{"payment.charge": a})
	const key = "test:payment.charge:order-lost-answer:v1"
	b.publishCommand(t, chargeCommand("evt-lost-answer", "order-lost-answer"))
	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status, "%+v %s", r, trail(t, b.store, key))
	require.Equal(t, 1, sb.TotalEffects(), "one charge in the target")
	exe := executes(t, b.store, key)
	require.Len(t, exe, 1, "no second call: %s", trail(t, b.store, key))
	require.Equal(t, journal.OutcomeUnknown, exe[0].Outcome, trail(t, b.store, key))
	atts, err := b.store.Attempts(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, journal.KindReconcile, atts[len(atts)-1].Kind, "settled by a lookup: %s", trail(t, b.store, key))
}
