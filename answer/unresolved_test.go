package answer_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	. "github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
)

// TestListUnresolvedIsTheRule: the list every face shows of the unresolved
// holds exactly the rows Thresholds.Unresolved calls unresolved — an
// unknown outcome with fewer than review_after lookups is still being
// settled and is not listed; one with review_after is (kind unknown); a
// retryable failure idle for idle_after is (kind idle_retry); a success is
// not.
func TestListUnresolvedIsTheRule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	th := Thresholds{ReviewAfter: 2, IdleAfter: 50 * time.Millisecond}

	claim := func(k string) journal.Claim {
		c, err := journal.ClaimOne(ctx, st, journal.ClaimRequest{Key: k, OperationType: "payment.charge", RequestHash: "aaaa",
			TargetSystem: "payments", EventID: "evt-" + k, Owner: "w", LeaseTTL: 30 * time.Second})
		require.NoError(t, err)
		return c
	}
	finish := func(k string, s journal.Status, lookups int) {
		c := claim(k)
		require.NoError(t, journal.CompleteOne(ctx, st, journal.Completion{Key: k, Token: c.Token, Status: s}))
		for range lookups {
			c := claim(k)
			require.Equal(t, journal.Reconcile, c.Decision)
			require.NoError(t, journal.CompleteOne(ctx, st, journal.Completion{Key: k, Token: c.Token, Status: s, Reconciled: true}))
		}
	}
	const (
		settling = "test:payment.charge:settling:v1"
		review   = "test:payment.charge:review:v1"
		idle     = "test:payment.charge:idle:v1"
		done     = "test:payment.charge:done:v1"
	)
	finish(settling, journal.StatusUnknown, 1)
	finish(review, journal.StatusUnknown, 2)
	finish(idle, journal.StatusFailedRetryable, 0)
	finish(done, journal.StatusSucceeded, 0)

	var l UnresolvedList
	require.Eventually(t, func() bool {
		l, err = th.ListUnresolved(ctx, st, 10)
		require.NoError(t, err)
		return len(l.IdleRetry) > 0
	}, 10*time.Second, 20*time.Millisecond, "the retryable failure goes idle after idle_after")
	keys := func(rs []journal.Record) (out []string) {
		for _, r := range rs {
			out = append(out, r.Key)
		}
		return out
	}
	require.Equal(t, []string{review}, keys(l.Of(KindUnknown)), "unknown after review_after lookups only")
	require.Equal(t, []string{idle}, keys(l.Of(KindIdleRetry)))
	require.Equal(t, []string{review, idle}, keys(l.All()))
	now := time.Now()
	for _, rec := range l.All() {
		require.True(t, th.Unresolved(rec, now), "%s is listed, so the rule calls it unresolved", rec.Key)
	}
	for _, k := range []string{settling, done} {
		rec, err := st.Get(ctx, k)
		require.NoError(t, err)
		require.False(t, th.Unresolved(rec, now), "%s is not listed, and the rule does not call it unresolved", k)
	}
	require.Equal(t, []Kind{KindUnknown, KindIdleRetry}, Kinds())
}
