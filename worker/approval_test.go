package worker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

// approvalSetup is setup with the built-in approval policy (payment.charge
// waits for one approver) on the journal named by engine, the parked
// stream, and a sweeper the test drives itself (Sweep).
func approvalSetup(t *testing.T, engine string) (*bundle, *worker.ApprovalSweeper, *approval.Service) {
	t.Helper()
	b := setup(t)
	if engine == "sqlite" {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		b.store = s
	}
	policy, err := operation.CompileApprovalPolicy(nil, nil)
	require.NoError(t, err)
	b.approvals = &worker.Approvals{Policy: policy, URL: func(k string) string { return "https://idemgate.example/ui/approvals/" + k }, NATS: b.ncfg}
	require.NoError(t, consumer.EnsureParked(context.Background(), b.js, b.ncfg, time.Hour))
	sw := worker.NewApprovalSweeper(worker.ApprovalSweeperConfig{}, b.store, b.js, b.ncfg, nil, nil)
	return b, sw, &approval.Service{Store: b.store, Policy: policy}
}

// awaitPending collects pending results for key until n arrived, each
// saying the intent awaits approval.
func (b *bundle) awaitPending(t *testing.T, key string, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for got := 0; got < n; {
		select {
		case r := <-b.results:
			if r.OperationKey != key {
				continue
			}
			require.Equal(t, operation.ResultPending, r.Status, "%+v", r)
			require.NotNil(t, r.Approval, "a pending answer says it awaits approval")
			require.Equal(t, "https://idemgate.example/ui/approvals/"+key, r.Approval.URL)
			got++
		case <-deadline:
			t.Fatalf("got %d of %d pending results for %s", got, n, key)
		}
	}
}

func publishAs(t *testing.T, b *bundle, body []byte, requester string) {
	t.Helper()
	m := natsMsg(wire.CommandSubject("payment.charge"), body)
	m.Header.Set(wire.HeaderRequester, requester)
	_, err := b.js.PublishMsg(context.Background(), m)
	require.NoError(t, err)
}

func natsMsg(subject string, body []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = body
	return m
}

func forEngines(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, e := range []string{"postgres", "sqlite"} {
		t.Run(e, func(t *testing.T) {
			t.Parallel()
			fn(t, e)
		})
	}
}

// TestApprovalCopiesWhileAwaitingOneEffect: 20 concurrent copies of a charge
// that waits for approval each get the same pending answer and nothing
// executes; after the approval, one effect.
func TestApprovalCopiesWhileAwaitingOneEffect(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, engine string) {
		b, sw, svc := approvalSetup(t, engine)
		b.worker(t, "w1", worker.Config{})
		b.worker(t, "w2", worker.Config{})
		const key = "test:payment.charge:evt-appr-20:v1"
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				publishAs(t, b, charge("evt-appr-20", "order-20", 125000), "agent:orders-bot")
			}()
		}
		wg.Wait()
		b.awaitPending(t, key, 20)
		effects, calls := b.target.count(key)
		require.Zero(t, effects+calls, "nothing executes while awaiting approval")
		rec, err := b.store.Get(context.Background(), key)
		require.NoError(t, err)
		require.Equal(t, journal.StatusAwaitingApproval, rec.Status)

		_, err = svc.Decide(context.Background(), "agent:orders-bot", key, journal.VoteApprove, "looks right")
		require.ErrorIs(t, err, journal.ErrSelfApproval, "the requester cannot approve")
		a, err := svc.Decide(context.Background(), "alice", key, journal.VoteApprove, "order 20 confirmed by phone")
		require.NoError(t, err)
		require.Equal(t, journal.ApprovalApproved, a.State)
		require.JSONEq(t, `{"operation":"payment.charge","target_system":"payments","account_id":"merchant-account-17",
			"order_id":"order-20","amount_minor":125000,"currency":"RUB"}`, string(a.Display))
		require.NoError(t, sw.Sweep(context.Background()))
		res := b.await(t, key, 1)
		require.Equal(t, operation.ResultSucceeded, res[0].Status)
		// A late copy replays.
		publishAs(t, b, charge("evt-appr-20", "order-20", 125000), "agent:orders-bot")
		require.Equal(t, operation.ResultSucceeded, b.await(t, key, 1)[0].Status)
		effects, calls = b.target.count(key)
		require.Equal(t, 1, effects)
		require.Equal(t, 1, calls)
		_, err = svc.Decide(context.Background(), "bob", key, journal.VoteApprove, "again")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
	})
}

// TestApprovalWorkerStoppedBeforeExecution: the approval is recorded and
// released while no worker runs; a worker started afterwards executes it
// once.
func TestApprovalWorkerStoppedBeforeExecution(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, engine string) {
		b, sw, svc := approvalSetup(t, engine)
		w := b.worker(t, "w1", worker.Config{})
		const key = "test:payment.charge:evt-appr-stop:v1"
		publishAs(t, b, charge("evt-appr-stop", "order-s", 5000), "agent:orders-bot")
		b.awaitPending(t, key, 1)
		w.Stop()
		_, err := svc.Decide(context.Background(), "alice", key, journal.VoteApprove, "ok")
		require.NoError(t, err)
		require.NoError(t, sw.Sweep(context.Background()))
		effects, _ := b.target.count(key)
		require.Zero(t, effects, "no worker: nothing executed yet")
		// A second sweep (another replica, a restart) releases nothing twice.
		require.NoError(t, sw.Sweep(context.Background()))
		b.worker(t, "w2", worker.Config{})
		require.Equal(t, operation.ResultSucceeded, b.await(t, key, 1)[0].Status)
		effects, calls := b.target.count(key)
		require.Equal(t, 1, effects)
		require.Equal(t, 1, calls)
	})
}

// TestApprovalDeniedNoEffect: a denial ends the intent failed_final
// approval_denied; its released command and later copies replay it.
func TestApprovalDeniedNoEffect(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, engine string) {
		b, sw, svc := approvalSetup(t, engine)
		b.worker(t, "w1", worker.Config{})
		const key = "test:payment.charge:evt-appr-deny:v1"
		publishAs(t, b, charge("evt-appr-deny", "order-d", 990000), "agent:orders-bot")
		b.awaitPending(t, key, 1)
		_, err := svc.Decide(context.Background(), "alice", key, journal.VoteDeny, "customer did not order this")
		require.NoError(t, err)
		require.NoError(t, sw.Sweep(context.Background()))
		res := b.await(t, key, 1)[0]
		require.Equal(t, operation.ResultFailedFinal, res.Status)
		require.Equal(t, journal.ErrorApprovalDenied, res.ErrorCode)
		publishAs(t, b, charge("evt-appr-deny", "order-d", 990000), "agent:orders-bot")
		require.Equal(t, journal.ErrorApprovalDenied, b.await(t, key, 1)[0].ErrorCode)
		_, err = svc.Decide(context.Background(), "bob", key, journal.VoteApprove, "overrule")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		effects, calls := b.target.count(key)
		require.Zero(t, effects+calls)
	})
}

// TestApprovalExpiredNoEffect: no decision within approval_ttl ends the
// intent failed_final approval_expired; nothing executes.
func TestApprovalExpiredNoEffect(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, engine string) {
		b, sw, svc := approvalSetup(t, engine)
		policy, err := operation.CompileApprovalPolicy(map[string]operation.ApprovalRule{
			operation.TypePaymentCharge: {Mode: operation.ApprovalRequired, TTL: time.Second}}, nil)
		require.NoError(t, err)
		b.approvals.Policy = policy
		b.worker(t, "w1", worker.Config{})
		const key = "test:payment.charge:evt-appr-exp:v1"
		publishAs(t, b, charge("evt-appr-exp", "order-e", 777), "agent:orders-bot")
		b.awaitPending(t, key, 1)
		a, err := b.store.Approval(context.Background(), key)
		require.NoError(t, err)
		require.WithinDuration(t, a.RequestedAt.Add(time.Second), a.ExpiresAt, time.Millisecond)
		// Wait on the journal's clock for the wait limit to pass, then sweep.
		for {
			now, err := b.store.Now(context.Background())
			require.NoError(t, err)
			if now.After(a.ExpiresAt) {
				break
			}
			time.Sleep(a.ExpiresAt.Sub(now) + time.Millisecond)
		}
		require.NoError(t, sw.Sweep(context.Background()))
		res := b.await(t, key, 1)[0]
		require.Equal(t, operation.ResultFailedFinal, res.Status)
		require.Equal(t, journal.ErrorApprovalExpired, res.ErrorCode)
		_, err = svc.Decide(context.Background(), "alice", key, journal.VoteApprove, "too late")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		effects, calls := b.target.count(key)
		require.Zero(t, effects+calls)
	})
}

// TestApprovalAfterRetrySameIntent: the agent retries the same intent
// while it waits (same pending answer, nothing executed); the approval then
// gives one effect.
func TestApprovalAfterRetrySameIntent(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, engine string) {
		b, sw, svc := approvalSetup(t, engine)
		b.worker(t, "w1", worker.Config{})
		const key = "test:payment.charge:evt-appr-retry:v1"
		publishAs(t, b, charge("evt-appr-retry", "order-r", 4200), "agent:orders-bot")
		b.awaitPending(t, key, 1)
		publishAs(t, b, charge("evt-appr-retry", "order-r", 4200), "agent:orders-bot")
		b.awaitPending(t, key, 1)
		// A changed amount under the same intent is a conflict, not a new wait.
		publishAs(t, b, charge("evt-appr-retry", "order-r", 4300), "agent:orders-bot")
		require.Equal(t, operation.ResultConflict, b.await(t, key, 1)[0].Status)
		_, err := svc.Decide(context.Background(), "alice", key, journal.VoteApprove, "ok")
		require.NoError(t, err)
		require.NoError(t, sw.Sweep(context.Background()))
		require.Equal(t, operation.ResultSucceeded, b.await(t, key, 1)[0].Status)
		effects, calls := b.target.count(key)
		require.Equal(t, 1, effects)
		require.Equal(t, 1, calls)
	})
}

// TestApprovalWaitingIntentOwnsItsKey: under a policy that gates charges
// above a threshold, a charge above it waits for a person; a changed
// request of the same intent whose amount is below the threshold (so not
// gated itself) is that waiting intent's conflict — it never claims the key
// and executes. Approved, the first request charges once. On both
// journals. (The soak's approval workload found the changed request
// executing.)
func TestApprovalWaitingIntentOwnsItsKey(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, engine string) {
		b, sw, _ := approvalSetup(t, engine)
		policy, err := operation.CompileApprovalPolicy(map[string]operation.ApprovalRule{
			operation.TypePaymentCharge: {Mode: operation.ApprovalAbove, Above: map[string]int64{"RUB": 500000}}}, nil)
		require.NoError(t, err)
		b.approvals.Policy = policy
		svc := &approval.Service{Store: b.store, Policy: policy}
		b.worker(t, "w1", worker.Config{})
		const key = "test:payment.charge:intent-owns:v1"
		body := func(event string, amount int) []byte {
			return []byte(fmt.Sprintf(`{"event_id":%q,"intent_id":"intent-owns","operation":"payment.charge",
				"payload":{"account_id":"merchant-account-17","order_id":"order-owns","amount_minor":%d,"currency":"rub"}}`, event, amount))
		}
		publishAs(t, b, body("evt-owns-1", 900000), "agent:orders-bot")
		b.awaitPending(t, key, 1)
		publishAs(t, b, body("evt-owns-2", 1000), "agent:orders-bot")
		res := b.await(t, key, 1)
		require.Equal(t, operation.ResultConflict, res[0].Status, "%+v", res[0])
		effects, calls := b.target.count(key)
		require.Zero(t, effects+calls, "the changed request never executes")

		_, err = svc.Decide(context.Background(), "alice", key, journal.VoteApprove, "the 9,000.00 charge is right")
		require.NoError(t, err)
		require.NoError(t, sw.Sweep(context.Background()))
		require.Equal(t, operation.ResultSucceeded, b.await(t, key, 1)[0].Status)
		// The changed request again, after the charge: still its conflict.
		publishAs(t, b, body("evt-owns-3", 1000), "agent:orders-bot")
		require.Equal(t, operation.ResultConflict, b.await(t, key, 1)[0].Status)
		effects, calls = b.target.count(key)
		require.Equal(t, 1, effects)
		require.Equal(t, 1, calls)
	})
}
