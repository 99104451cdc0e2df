package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/worker"
)

// slowRetries is a retry policy whose delays outlast every test: a copy
// sent back to JetStream with the retry delay would not return in time.
var slowRetries = worker.RetryPolicy{InitialDelay: time.Minute, MaxDelay: time.Minute, MaxElapsed: time.Hour}

func intentCharge(event, intent string) []byte {
	return []byte(fmt.Sprintf(`{"event_id":%q,"intent_id":%q,"operation":"payment.charge","approval_id":"appr-1",
		"payload":{"account_id":"merchant-account-17","order_id":%q,"amount_minor":100,"currency":"rub"}}`, event, intent, "order-"+intent))
}

// resultsFor collects, in arrival order, the results for key until n final
// ones (not pending) arrived.
func (b *bundle) resultsFor(t *testing.T, key string, n int) []operation.Result {
	t.Helper()
	var got []operation.Result
	final := 0
	deadline := time.After(30 * time.Second)
	for final < n {
		select {
		case r := <-b.results:
			if r.OperationKey != key {
				continue
			}
			got = append(got, r)
			if r.Status != operation.ResultPending {
				final++
			}
		case <-deadline:
			t.Fatalf("got %d of %d final results for %s: %+v", final, n, key, got)
		}
	}
	return got
}

// Copies of a command that arrive while this worker's call for their key
// runs wait for that call, not for the retry delay (here a minute): each is
// told "pending" at once and answered from the journal as soon as the call's
// result is published, with one effect and no redelivery.
func TestCopiesWaitForTheCallNotTheRetryDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	b.metrics = worker.NewMetrics(reg)
	block := make(chan struct{})
	b.target.block = block
	b.worker(t, "w1", worker.Config{Retry: slowRetries, HeartbeatInterval: 100 * time.Millisecond})
	const key = "test:payment.charge:intent-wait:v1"

	b.publish(t, intentCharge("evt-wait-0", "intent-wait"))
	require.Eventually(t, func() bool { _, c := b.target.count(key); return c == 1 }, 30*time.Second, 5*time.Millisecond)
	for i := 1; i <= 3; i++ {
		b.publish(t, intentCharge(fmt.Sprint("evt-wait-", i), "intent-wait"))
	}
	require.Eventually(t, func() bool { return series(t, reg, "idemgate_commands_waited_total", nil) == 3 },
		30*time.Second, 5*time.Millisecond, "three copies wait for the call")
	time.Sleep(300 * time.Millisecond) // several heartbeats while they wait
	b.target.mu.Lock()
	b.target.block = nil
	b.target.mu.Unlock()
	close(block)

	res := b.resultsFor(t, key, 4)
	pendingSeen := map[string]bool{}
	replayed := 0
	for _, r := range res {
		if r.Status == operation.ResultPending {
			pendingSeen[r.EventID] = true
			continue
		}
		require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
		if r.Replayed {
			replayed++
			require.True(t, pendingSeen[r.EventID], "the copy %s is told pending before its result", r.EventID)
		}
	}
	require.Equal(t, 3, replayed, "the copies are answered from the journal")
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls)
	cons, err := b.js.Consumer(context.Background(), b.ncfg.CommandsStream, b.ncfg.Durable)
	require.NoError(t, err)
	ci, err := cons.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, ci.NumRedelivered, "no copy went back to JetStream")
}

// The call's answer is lost while copies wait: they are claimed again when
// its delivery settles, one of them (or the command's own redelivery)
// looks the key up, and every copy ends succeeded with the one object,
// without a second call and without the retry delay.
func TestCopiesWaitingOnALostAnswerEndWithTheLookup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	block := make(chan struct{})
	b.target.block = block
	b.target.lostNext = 1
	b.worker(t, "w1", worker.Config{Retry: slowRetries})
	const key = "test:payment.charge:intent-lost:v1"

	b.publish(t, intentCharge("evt-lost-0", "intent-lost"))
	require.Eventually(t, func() bool { _, c := b.target.count(key); return c == 1 }, 30*time.Second, 5*time.Millisecond)
	for i := 1; i <= 3; i++ {
		b.publish(t, intentCharge(fmt.Sprint("evt-lost-", i), "intent-lost"))
	}
	waitFor(t, 30*time.Second, "three copies told pending", func() (bool, string) {
		n := 0
		for len(b.results) > 0 {
			if r := <-b.results; r.OperationKey == key && r.Status == operation.ResultPending {
				n++
			}
		}
		return n >= 3, "pending results"
	})
	b.target.mu.Lock()
	b.target.block = nil
	b.target.mu.Unlock()
	close(block)

	res := b.await(t, key, 4)
	for _, r := range res {
		require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
		require.Equal(t, res[0].TargetObjectID, r.TargetObjectID)
	}
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls, "the lost answer is looked up, never called again")
	b.target.mu.Lock()
	lookups := b.target.lookups
	b.target.mu.Unlock()
	require.GreaterOrEqual(t, lookups, 1)
}

// At most half of MaxInFlight copies wait at once: with four in flight
// (one fetched at a time), the call and three copies, two copies wait and
// the third goes back to JetStream with the retry delay (here a minute), so
// copies never take every slot from the work they wait on. The two that
// waited are answered when the call ends.
func TestAtMostHalfOfMaxInFlightWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ncfg.FetchBatch = 1
	reg := prometheus.NewRegistry()
	b.metrics = worker.NewMetrics(reg)
	block := make(chan struct{})
	b.target.block = block
	b.worker(t, "w1", worker.Config{Retry: slowRetries, MaxInFlight: 4})
	const key = "test:payment.charge:intent-cap:v1"

	b.publish(t, intentCharge("evt-cap-0", "intent-cap"))
	require.Eventually(t, func() bool { _, c := b.target.count(key); return c == 1 }, 30*time.Second, 5*time.Millisecond)
	for i := 1; i <= 3; i++ {
		b.publish(t, intentCharge(fmt.Sprint("evt-cap-", i), "intent-cap"))
	}
	require.Eventually(t, func() bool {
		return series(t, reg, "idemgate_claim_decisions_total", map[string]string{"decision": "in_progress"}) == 3
	}, 30*time.Second, 5*time.Millisecond, "the three copies claimed")
	require.Equal(t, 2.0, series(t, reg, "idemgate_commands_waited_total", nil), "two copies wait, the third went back")
	b.target.mu.Lock()
	b.target.block = nil
	b.target.mu.Unlock()
	close(block)

	res := b.await(t, key, 3) // the call and the two copies that waited
	for _, r := range res {
		require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
	}
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls)
}

// A copy's wait for this worker's call of its key is bounded by a call plus
// its lookup (here 2 × 1 s): a call that runs longer (this target ignores
// the call's deadline) does not keep its copies held. When the bound
// passes the copy is claimed again, finds the key still held and goes back
// to JetStream; it is answered from the journal once the call ends. While
// the call runs, the oldest delivery's age shows on
// idemgate_delivery_oldest_held_seconds; once all are settled it is 0.
func TestACopyWaitsNoLongerThanACallAndItsLookup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	b.metrics = worker.NewMetrics(reg)
	block := make(chan struct{})
	b.target.block = block
	b.worker(t, "w1", worker.Config{Retry: worker.RetryPolicy{InitialDelay: 200 * time.Millisecond, MaxDelay: 200 * time.Millisecond,
		MaxElapsed: time.Hour}, CallTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond})
	const key = "test:payment.charge:intent-bound:v1"

	b.publish(t, intentCharge("evt-bound-0", "intent-bound"))
	require.Eventually(t, func() bool { _, c := b.target.count(key); return c == 1 }, 30*time.Second, 5*time.Millisecond)
	b.publish(t, intentCharge("evt-bound-1", "intent-bound"))
	require.Eventually(t, func() bool { return series(t, reg, "idemgate_commands_waited_total", nil) == 1 },
		30*time.Second, 5*time.Millisecond, "the copy waits for the call")
	require.Eventually(t, func() bool { return series(t, reg, "idemgate_commands_wait_ended_total", nil) == 1 },
		30*time.Second, 10*time.Millisecond, "the copy's wait ends at its bound while the call still runs")
	require.Greater(t, series(t, reg, "idemgate_delivery_oldest_held_seconds", nil), 2.0, "the call's delivery is held")
	cons, err := b.js.Consumer(context.Background(), b.ncfg.CommandsStream, b.ncfg.Durable)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(context.Background())
		return err == nil && ci.NumRedelivered >= 1
	}, 30*time.Second, 10*time.Millisecond, "the copy went back to JetStream")
	close(block)

	res := b.resultsFor(t, key, 2)
	for _, r := range res {
		if r.Status != operation.ResultPending {
			require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
		}
	}
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls)
	require.Eventually(t, func() bool { return series(t, reg, "idemgate_delivery_oldest_held_seconds", nil) == 0 },
		30*time.Second, 10*time.Millisecond, "nothing held once every delivery is settled")
}
