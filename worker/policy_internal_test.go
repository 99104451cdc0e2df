package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

func TestNextRetryStaysWithinBounds(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{InitialDelay: 100 * time.Millisecond, Multiplier: 2, MaxDelay: time.Second}.WithDefaults()
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for n, base := range want {
		lo, hi := p.Bounds(n + 1)
		require.Equal(t, base*time.Millisecond/2, lo, "attempt %d", n+1)
		require.Equal(t, base*time.Millisecond*3/2, hi, "attempt %d", n+1)
		for range 200 {
			d := p.NextRetry(n + 1)
			require.GreaterOrEqual(t, d, lo)
			require.LessOrEqual(t, d, hi)
		}
	}
	off := false
	p.Jitter = &off
	lo, hi := p.Bounds(3)
	require.Equal(t, 400*time.Millisecond, lo)
	require.Equal(t, lo, hi)
	require.Equal(t, lo, p.NextRetry(3))
	require.Equal(t, p.NextRetry(1), p.NextRetry(0), "attempts below 1 count as the first")
}

// TestHorizonSumsTheSchedule: the redelivery horizon is the schedule's
// longest delays plus an AckWait per delivery — the same formula as every
// wait, not a copy of it.
func TestHorizonSumsTheSchedule(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{}.WithDefaults()
	var want time.Duration
	for n := 1; n < 20; n++ {
		_, hi := p.Bounds(n)
		want += hi + time.Minute
	}
	require.Equal(t, want, p.Horizon(20, time.Minute))
	require.Zero(t, p.Horizon(1, time.Minute), "one delivery, no retry")
}

func TestBudgetIsAttemptsAndTime(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxAttempts: 4, MaxElapsed: time.Minute}.WithDefaults()
	require.False(t, p.exhausted(3, 59*time.Second))
	require.True(t, p.exhausted(4, time.Second), "attempts spent")
	require.True(t, p.exhausted(1, 61*time.Second), "the next attempt would start past max_elapsed")
}

// TestRetryRunIsTheBackOff: the in-lease loop's BackOff is the policy's
// schedule at the journal's attempt number, at least the target's
// Retry-After, and stops when the wait outgrows the claim or the budget.
// The budget counts what the trail (here a real journal's) shows: attempts
// a rate limit held back spend none of it, and a rate limit's answer never
// ends the loop for the budget.
func TestRetryRunIsTheBackOff(t *testing.T) {
	t.Parallel()
	off := false
	store := pgtest.Store(t)
	w := &Worker{cfg: Config{CallTimeout: time.Second,
		Retry: RetryPolicy{MaxAttempts: 5, MaxElapsed: time.Minute, InitialDelay: time.Second, MaxDelay: 8 * time.Second, Jitter: &off, InLease: 8 * time.Second}.WithDefaults()},
		d: Deps{Store: store}, log: slog.New(slog.DiscardHandler)}
	j := &job{claimedAt: time.Now()}
	j.claim.Attempt = 2
	r := &retryRun{w: w, j: j, adapter: capsAdapter{name: "target"}, began: time.Now(), ctx: context.Background(), last: &adapters.Error{Code: adapters.CodeHTTP503}}
	var b backoff.BackOff = r
	require.Equal(t, 2*time.Second, b.NextBackOff())
	r.last.RetryAfter = 3 * time.Second
	require.Equal(t, 3*time.Second, b.NextBackOff(), "Retry-After honoured")
	j.claim.Attempt = 4
	require.Equal(t, backoff.Stop, b.NextBackOff(), "8s and the call do not fit in the 8s in-lease")
	require.False(t, r.exhausted, "a later retry, by redelivery")
	require.Equal(t, 8*time.Second, r.delay)

	// Five attempts in the journal, the fifth one running.
	ctx := context.Background()
	trail := func(key string, codes ...string) {
		req := journal.ClaimRequest{Key: key, OperationType: "crm.task.create", RequestHash: "h", TargetSystem: "crm", Owner: "w", LeaseTTL: time.Minute}
		for i := 0; ; i++ {
			sent := time.Now()
			c, err := journal.ClaimOne(ctx, store, req)
			require.NoError(t, err)
			require.Equal(t, journal.Execute, c.Decision)
			j.setClaim(c, sent)
			if i == len(codes) {
				return
			}
			require.NoError(t, journal.CompleteOne(ctx, store, journal.Completion{Key: key, Token: c.Token, Status: journal.StatusFailedRetryable, ErrorCode: codes[i]}))
		}
	}
	r.last.RetryAfter = 0
	trail("test:crm.task.create:spent:v1", adapters.CodeHTTP503, adapters.CodeHTTP503, adapters.CodeConnectionRefused, adapters.CodeHTTP503)
	require.Equal(t, 5, j.claim.Attempt)
	r.began = time.Now()
	require.Equal(t, backoff.Stop, b.NextBackOff())
	require.True(t, r.exhausted, "max_attempts spent")

	r.exhausted = false
	r.last = &adapters.Error{Code: adapters.CodeTargetRateLimit}
	require.Equal(t, backoff.Stop, b.NextBackOff(), "8s and the call do not fit in the 8s in-lease")
	require.False(t, r.exhausted, "the target's rate limit spends no budget: a later retry, by redelivery")

	r.last = &adapters.Error{Code: adapters.CodeHTTP503}
	trail("test:crm.task.create:held:v1", adapters.CodeClientRateLimit, adapters.CodeHTTP503, adapters.CodeTargetRateLimit, adapters.CodeHTTP503)
	require.Equal(t, 5, j.claim.Attempt)
	require.Equal(t, backoff.Stop, b.NextBackOff())
	require.False(t, r.exhausted, "two of five attempts were held back by a rate limit: three spent")
}

type capsAdapter struct {
	adapters.Adapter
	name string
	caps adapters.Capabilities
}

func (a capsAdapter) Name() string                        { return a.name }
func (a capsAdapter) Capabilities() adapters.Capabilities { return a.caps }

// TestRulesPerAdapter: an ambiguous gateway answer is looked up where the
// target can be searched, retried with the same key where it cannot but
// deduplicates, and a per-adapter block refines the global rules for that
// target only.
func TestRulesPerAdapter(t *testing.T) {
	t.Parallel()
	lookup := capsAdapter{name: "yookassa", caps: adapters.Capabilities{NativeKey: true, Lookup: true}}
	blind := capsAdapter{name: "keyonly", caps: adapters.Capabilities{NativeKey: true}}
	neither := capsAdapter{name: "neither"}
	tuned := capsAdapter{name: "tuned", caps: adapters.Capabilities{Lookup: true}}
	byAdapter := map[string]Rules{"tuned": {Retry: []string{adapters.CodeHTTP502}, NeverRetry: []string{"portal_blocked"}}}
	class := func(a adapters.Adapter, code string, adapterClass adapters.Class) adapters.Class {
		c, err := rulesFor(DefaultRules(), byAdapter, a)
		require.NoError(t, err)
		got, _ := c.classify(adapters.NewError(code, adapterClass, nil))
		return got
	}
	for _, tc := range []struct {
		a    adapters.Adapter
		code string
		want adapters.Class
	}{
		{lookup, adapters.CodeHTTP502, adapters.ReconcileBeforeRetry},
		{lookup, adapters.CodeHTTP504, adapters.ReconcileBeforeRetry},
		{lookup, adapters.CodeHTTP500, adapters.ReconcileBeforeRetry},
		{lookup, adapters.CodeHTTP503, adapters.Retry},
		{lookup, adapters.CodeHTTP429, adapters.Retry},
		{lookup, adapters.CodeConnectionRefused, adapters.Retry},
		{blind, adapters.CodeHTTP502, adapters.Retry},
		{blind, adapters.CodeHTTP500, adapters.ReconcileBeforeRetry},
		{neither, adapters.CodeHTTP502, adapters.ReconcileBeforeRetry},
		{tuned, adapters.CodeHTTP502, adapters.Retry},
		{tuned, "portal_blocked", adapters.NeverRetry},
		{tuned, adapters.CodeHTTP504, adapters.ReconcileBeforeRetry},
		{lookup, "portal_blocked", adapters.Retry}, // unlisted: the adapter's class
	} {
		require.Equal(t, tc.want, class(tc.a, tc.code, adapters.Retry), "%s %s", tc.a.Name(), tc.code)
	}
	_, err := rulesFor(DefaultRules(), map[string]Rules{"tuned": {Retry: []string{"x"}, NeverRetry: []string{"x"}}}, tuned)
	require.ErrorContains(t, err, "rules_by_adapter.tuned")
	_, err = adapterRules(Config{Rules: DefaultRules(), RulesByAdapter: map[string]Rules{"nobody": {}}},
		map[string]adapters.Adapter{"payment.charge": lookup})
	require.ErrorContains(t, err, "rules_by_adapter.nobody")
}

// TestDefaultRulesFollowTheClassTable: the worker's default rules give every
// shared code the class the adapters' table gives it, and nothing else.
func TestDefaultRulesFollowTheClassTable(t *testing.T) {
	t.Parallel()
	c, err := DefaultRules().compile()
	require.NoError(t, err)
	require.Equal(t, adapters.DefaultClasses(), map[string]adapters.Class(c))
	require.Equal(t, adapters.ReconcileBeforeRetry, c[adapters.CodeHTTP502], "a gateway's 502 may follow a commit upstream")
}

func TestHorizonsRefused(t *testing.T) {
	t.Parallel()
	ncfg := consumer.Config{AckWait: 30 * time.Second, CommandsMaxAge: time.Hour}.WithDefaults()
	base := Config{LeaseTTL: 10 * time.Second, CallTimeout: 5 * time.Second, HeartbeatInterval: 3 * time.Second,
		Retry: RetryPolicy{InLease: 10 * time.Second, MaxElapsed: time.Minute}}.WithDefaults()
	require.NoError(t, ValidateHorizons(base, ncfg))
	inLease := base
	inLease.Retry.InLease = 26 * time.Second
	require.ErrorContains(t, ValidateHorizons(inLease, ncfg), "retry.in_lease")
	budget := base
	budget.Retry.MaxElapsed = 2 * time.Hour
	require.ErrorContains(t, ValidateHorizons(budget, ncfg), "retry.max_elapsed")
}
