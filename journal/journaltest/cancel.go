package journaltest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// exerciseCancel checks journal.CancelUnclaimed: it cancels a key nobody
// claimed, and the worker that claims it later replays the cancellation;
// a key already claimed, executed or being retried or looked up is left
// as it was.
func exerciseCancel(t *testing.T, newStore NewStore, _ Features) {
	const code, note = "cancelled_before_sent", "cancelled before any worker claimed it"
	parallel(t, newStore, "CancelUnclaimed", func(t *testing.T, s journal.Store) {
		k := key(t)
		cancelled, _, err := journal.CancelUnclaimed(ctx(t), s, req(k, hashA, "canceller", 5*time.Second), code, note)
		require.NoError(t, err)
		require.True(t, cancelled)
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, journal.StatusFailedFinal, rec.Status)
		require.Equal(t, code, rec.ErrorCode)
		att, err := s.Attempts(ctx(t), k)
		require.NoError(t, err)
		require.Len(t, att, 1)
		require.Equal(t, note, att[0].Note)
		// The worker that takes the command afterwards replays it.
		w := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.Equal(t, journal.ReplayFailed, w.Decision)
		// Cancelling again changes nothing.
		again, _, err := journal.CancelUnclaimed(ctx(t), s, req(k, hashA, "canceller", 5*time.Second), code, note)
		require.NoError(t, err)
		require.False(t, again)
	})

	parallel(t, newStore, "CancelLeavesClaimedAlone", func(t *testing.T, s journal.Store) {
		cancel := func(k string) journal.Claim {
			cancelled, c, err := journal.CancelUnclaimed(ctx(t), s, req(k, hashA, "canceller", 5*time.Second), code, note)
			require.NoError(t, err)
			require.False(t, cancelled, "%s is not cancelled", k)
			return c
		}
		// Claimed and under a live lease: a call may be in flight.
		kLive, _ := claimed(t, s, 30*time.Second)
		require.Equal(t, journal.InProgress, cancel(kLive).Decision)
		rec, err := s.Get(ctx(t), kLive)
		require.NoError(t, err)
		require.Equal(t, journal.StatusStarted, rec.Status)
		require.Equal(t, owner, rec.LeaseOwner)

		// Succeeded: replayed, untouched.
		kDone := key(t)
		finished(t, s, kDone, journal.StatusSucceeded)
		require.Equal(t, journal.ReplaySucceeded, cancel(kDone).Decision)

		// A retryable failure: an attempt was sent; handed back for its retry.
		kRetry, c := claimed(t, s, 30*time.Second)
		complete(t, s, journal.Completion{Key: kRetry, Token: c.Token, Status: journal.StatusFailedRetryable, ErrorCode: "http_503"})
		cancel(kRetry)
		rec, err = s.Get(ctx(t), kRetry)
		require.NoError(t, err)
		require.Equal(t, journal.StatusFailedRetryable, rec.Status)
		require.Equal(t, "http_503", rec.ErrorCode)
		w := claim(t, s, req(kRetry, hashA, owner, 30*time.Second))
		require.Equal(t, journal.Execute, w.Decision, "the retry goes on")

		// An unknown outcome: handed back to be looked up.
		kUnknown, c := claimed(t, s, 30*time.Second)
		complete(t, s, journal.Completion{Key: kUnknown, Token: c.Token, Status: journal.StatusUnknown, ErrorCode: "timeout"})
		cancel(kUnknown)
		rec, err = s.Get(ctx(t), kUnknown)
		require.NoError(t, err)
		require.Equal(t, journal.StatusUnknown, rec.Status)
		require.Equal(t, "timeout", rec.ErrorCode)
	})
}
