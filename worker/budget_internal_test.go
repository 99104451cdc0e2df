package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/journal"
)

// TestBudgetSpendsNothingOnWaits: what an intent's trail spends of the
// retry budget. Attempts a rate limit held back (the client's bucket, the
// target's refusal) are neither attempts nor elapsed time up to the next
// attempt; after a lost answer, the wait for the target's search to settle
// is no elapsed time; every other attempt and its backoff is.
func TestBudgetSpendsNothingOnWaits(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	exe := func(n int, start, end float64, out journal.AttemptOutcome, code string) journal.Attempt {
		a := journal.Attempt{Attempt: n, Token: int64(n), Kind: journal.KindExecute, StartedAt: at(start), Outcome: out, ErrorCode: code}
		if end >= 0 {
			a.FinishedAt = at(end)
		}
		return a
	}
	lookup := func(start, end float64) journal.Attempt {
		return journal.Attempt{Kind: journal.KindReconcile, StartedAt: at(start), FinishedAt: at(end), Outcome: journal.OutcomeFailedRetryable}
	}
	const settle = 60 * time.Second
	cases := []struct {
		name    string
		atts    []journal.Attempt
		now     float64
		want    budgetUse
		fresh   bool // every attempt before the last one was held back
		noTrail bool
	}{
		{name: "nothing yet", now: 5, want: budgetUse{}, noTrail: true},
		{name: "first attempt running", atts: []journal.Attempt{exe(1, 0, -1, "", "")}, now: 2,
			want: budgetUse{attempts: 1, elapsed: 2 * time.Second}, fresh: true},
		{name: "held for the client's bucket, then a 503", atts: []journal.Attempt{
			exe(1, 0, 0.1, journal.OutcomeFailedRetryable, adapters.CodeClientRateLimit),
			exe(2, 90, 90.5, journal.OutcomeFailedRetryable, adapters.CodeTargetRateLimit),
			exe(3, 91, 91.2, journal.OutcomeFailedRetryable, adapters.CodeHTTP503),
			exe(4, 92, -1, "", ""),
		}, now: 92.5, want: budgetUse{attempts: 2, elapsed: 1500 * time.Millisecond}, fresh: false},
		{name: "only held back so far", atts: []journal.Attempt{
			exe(1, 0, 0.1, journal.OutcomeFailedRetryable, adapters.CodeClientRateLimit),
			exe(2, 40, 40.2, journal.OutcomeFailedRetryable, adapters.CodeHTTP429),
			exe(3, 45, -1, "", ""),
		}, now: 46, want: budgetUse{attempts: 1, elapsed: time.Second}, fresh: true},
		{name: "a lost answer waits out the settle time", atts: []journal.Attempt{
			exe(1, 0, 10, journal.OutcomeUnknown, adapters.CodeTimeoutAfterRequestSent),
			lookup(60, 61),
			exe(2, 61, -1, "", ""),
		}, now: 62, want: budgetUse{attempts: 2, elapsed: 12 * time.Second}},
		{name: "a dead owner's attempt, looked up after the settle time", atts: []journal.Attempt{
			exe(1, 0, 30, journal.OutcomeAbandoned, ""),
			lookup(30, 31),
			lookup(60, 61),
		}, now: 61, want: budgetUse{attempts: 1, elapsed: 31 * time.Second}},
		{name: "a lost answer retried before the settle time ended", atts: []journal.Attempt{
			exe(1, 0, 5, journal.OutcomeUnknown, adapters.CodeHTTP504),
			exe(2, 20, 21, journal.OutcomeFailedRetryable, adapters.CodeHTTP503),
		}, now: 25, want: budgetUse{attempts: 2, elapsed: 10 * time.Second}},
		{name: "ordinary failures spend it all", atts: []journal.Attempt{
			exe(1, 0, 1, journal.OutcomeFailedRetryable, adapters.CodeHTTP503),
			exe(2, 2, 3, journal.OutcomeFailedRetryable, adapters.CodeConnectionRefused),
		}, now: 7, want: budgetUse{attempts: 2, elapsed: 7 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, budgetUsed(tc.atts, at(tc.now), settle))
			if len(tc.atts) > 0 {
				last := tc.atts[len(tc.atts)-1]
				if last.Kind == journal.KindExecute {
					require.Equal(t, tc.fresh, onlyThrottled(tc.atts, last.Token))
				}
			}
		})
	}
	rec := journal.Record{AttemptCount: 3, CreatedAt: t0}
	require.Equal(t, budgetUse{attempts: 3, elapsed: time.Minute}, budgetOf(nil, rec, time.Minute, settle), "without a trail: the count and the age")

	p := RetryPolicy{MaxAttempts: 4, MaxElapsed: time.Minute}.WithDefaults()
	final, _ := notFoundIsFinal(p, nil, journal.Record{AttemptCount: 1}, budgetUse{attempts: 1, elapsed: 12 * time.Second})
	require.False(t, final, "a lost answer whose lookup found nothing after the settle time is retried")
	final, note := notFoundIsFinal(p, nil, journal.Record{AttemptCount: 4}, budgetUse{attempts: 4, elapsed: 12 * time.Second})
	require.True(t, final)
	require.Contains(t, note, "retries ran out")
}
