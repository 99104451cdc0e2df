package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sbbitrix24 "github.com/idemgate/idemgate/sandbox/bitrix24"
	"github.com/idemgate/idemgate/worker"
)

// TestThrottledImportEndsSucceeded: 200 CRM task intents, three copies
// each, through two replicas, each with its own client-side bucket at the
// portal's rate in bursts of its bucket less ten (the adapter's default
// shape), so that together they offer the portal twice what it takes and
// its own 503 QUERY_LIMIT_EXCEEDED comes into play. The retry budget (4
// attempts, 10 s) is far smaller than the import takes: waiting for a
// bucket — a replica's or the portal's — spends none of it. Every intent
// succeeds, the portal holds one task per intent, no result and no row is
// failed_final, and the import takes no more than 25 % longer than the
// portal's limit allows for the requests it needs (a first attempt costs
// three: list, add, re-list).
//
// It runs on its own (not in parallel) since it measures time.
func TestThrottledImportEndsSucceeded(t *testing.T) {
	const (
		intents = 200
		copies  = 3
		// The portal: a bucket of 50 requests leaking 20 a second.
		portalBucket = 50
		portalRate   = 20.0
		perTask      = 3
	)
	b := setup(t)
	sb := sbbitrix24.New(sbbitrix24.Options{Bucket: portalBucket, LeakPerSec: portalRate, Options: sandbox.Options{MaxHang: 10 * time.Second}})
	_, err := sb.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	uid, code := sb.Credentials()
	// Horizons with room for a busy machine: a call that outlasts its
	// timeout is a lost answer, settled by a lookup, which costs time.
	b.ncfg.AckWait = 15 * time.Second
	replica := func(owner string) {
		a, err := bitrix24.New(bitrix24.Config{PortalURL: sb.URL(), UserID: uid, WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)},
			HTTPConfig: adapters.HTTPConfig{Timeout: 5 * time.Second, RateLimit: adapters.RateLimit{Rate: portalRate, Burst: portalBucket - 10}}})
		require.NoError(t, err)
		b.workerFor(t, owner, worker.Config{LeaseTTL: 8 * time.Second, CallTimeout: 5 * time.Second,
			Retry: worker.RetryPolicy{MaxAttempts: 4, MaxElapsed: 10 * time.Second, InLease: 5 * time.Second}},
			map[string]adapters.Adapter{"crm.task.create": a})
	}
	replica("replica-a")
	replica("replica-b")

	keys := make([]string, intents)
	want := map[string]bool{}
	for i := range keys {
		keys[i] = fmt.Sprintf("test:crm.task.create:import-%03d:v1", i)
		want[keys[i]] = true
	}
	began := time.Now()
	for c := range copies {
		for i := range intents {
			b.publishCommand(t, taskCommand(fmt.Sprintf("evt-import-%03d-%d", i, c), fmt.Sprintf("import-%03d", i)))
		}
	}

	final := map[string]operation.Result{}
	var finalFailures []operation.Result
	var last time.Time
	deadline := time.After(90 * time.Second)
	for len(final) < intents {
		select {
		case r := <-b.results:
			if !want[r.OperationKey] || r.Status == operation.ResultPending {
				continue
			}
			if r.Status == operation.ResultFailedFinal {
				finalFailures = append(finalFailures, r)
			}
			if _, seen := final[r.OperationKey]; !seen {
				final[r.OperationKey] = r
				last = time.Now()
			}
		case <-deadline:
			t.Fatalf("final results for %d of %d intents after 90 s (%d failed_final so far)", len(final), intents, len(finalFailures))
		}
	}
	elapsed := last.Sub(began)

	ctx := context.Background()
	codes := map[string]int{}
	for _, key := range keys {
		r := final[key]
		require.Equal(t, operation.ResultSucceeded, r.Status, "%s: %+v %s", key, r, trail(t, b.store, key))
		require.Equal(t, 1, sb.Effects(key), "one task for %s: %s", key, trail(t, b.store, key))
		rec, err := b.store.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, journal.StatusSucceeded, rec.Status, trail(t, b.store, key))
		for _, a := range executes(t, b.store, key) {
			if a.Outcome != journal.OutcomeSucceeded {
				codes[a.ErrorCode]++ // a busy machine may also lose an answer
			}
		}
	}
	require.Empty(t, finalFailures, "no intent ends failed_final")
	require.Equal(t, intents, sb.TotalEffects(), "effects = intents")

	// What the limit allows: the portal's bucket takes its capacity at
	// once, then portalRate a second.
	allowed := time.Duration(float64(intents*perTask-portalBucket) / portalRate * float64(time.Second))
	t.Logf("%d intents × %d copies in %v; the limit allows %v (ratio %.2f); attempts that did not succeed, by code: %v",
		intents, copies, elapsed.Round(time.Millisecond), allowed, elapsed.Seconds()/allowed.Seconds(), codes)
	require.LessOrEqual(t, elapsed, allowed*5/4, "the import takes at most 25 %% longer than the limit allows")
}

// TestLostAnswerOutlastingTheBudgetIsRetried: Bitrix24's settle time (a
// "not found" counts only once it has passed since the attempt began) is
// longer than the whole retry budget, as with the defaults (60 s against a
// 1 m max_elapsed). The add's answer is lost (504 from a gateway; the
// portal made nothing). The wait for the search to settle spends none of
// the budget: the lookup finds nothing and the intent is retried with the
// same key, and ends succeeded with one task, not failed_final after one
// call.
func TestLostAnswerOutlastingTheBudgetIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb := sbbitrix24.New(sbbitrix24.Options{Bucket: -1, Options: sandbox.Options{MaxHang: 10 * time.Second}})
	_, err := sb.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	uid, code := sb.Credentials()
	const settle = 3 * time.Second
	a, err := bitrix24.New(bitrix24.Config{PortalURL: sb.URL(), UserID: uid, WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)},
		SettleTime: settle, HTTPConfig: adapters.HTTPConfig{Timeout: time.Second}})
	require.NoError(t, err)
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultRawResponse, Scope: sandbox.ScopeCreate, Count: 1,
		Status: http.StatusGatewayTimeout, Body: "<html>504 Gateway Time-out</html>"}))
	policy := worker.RetryPolicy{MaxAttempts: 4, MaxElapsed: 2 * time.Second, InLease: 2 * time.Second}
	require.Greater(t, settle, policy.MaxElapsed, "the settle time outlasts the budget")
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second, Retry: policy},
		map[string]adapters.Adapter{"crm.task.create": a})

	const key = "test:crm.task.create:task-lost-settle:v1"
	b.publishCommand(t, taskCommand("evt-lost-settle", "task-lost-settle"))
	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status, "%+v %s", r, trail(t, b.store, key))
	require.Equal(t, 1, sb.Effects(key), "one task in the portal: %s", trail(t, b.store, key))
	require.Equal(t, 1, sb.TotalEffects())
	exe := executes(t, b.store, key)
	require.Len(t, exe, 2, "the lost answer, then the retry with the same key: %s", trail(t, b.store, key))
	require.Equal(t, journal.OutcomeUnknown, exe[0].Outcome, trail(t, b.store, key))
	require.Equal(t, journal.OutcomeSucceeded, exe[1].Outcome, trail(t, b.store, key))
	require.GreaterOrEqual(t, exe[1].StartedAt.Sub(exe[0].StartedAt), settle, "retried only once the search had settled: %s", trail(t, b.store, key))
}
