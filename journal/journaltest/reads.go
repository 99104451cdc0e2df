package journaltest

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exerciseReads checks reads and lists: idle retryable failures, an unknown key.
func exerciseReads(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "IdleRetryableListed", func(t *testing.T, s journal.Store) {
		kRetry, kDone, kUnknown := key(t), key(t), key(t)
		for k, st := range map[string]journal.Status{kRetry: journal.StatusFailedRetryable, kDone: journal.StatusSucceeded, kUnknown: journal.StatusUnknown} {
			finished(t, s, k, st)
		}
		list, err := s.ListIdleRetryable(ctx(t), time.Hour, 10)
		require.NoError(t, err)
		require.Empty(t, list, "nothing idle for an hour")
		deadline := time.Now().Add(10 * time.Second)
		for {
			list, err = s.ListIdleRetryable(ctx(t), 50*time.Millisecond, 10)
			require.NoError(t, err)
			if len(list) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		require.Len(t, list, 1)
		require.Equal(t, kRetry, list[0].Key)
		require.Equal(t, journal.StatusFailedRetryable, list[0].Status)
		// A retryable failure held for its backoff is not idle before the hold ends.
		kHeld := key(t)
		ch := claim(t, s, req(kHeld, hashA, owner, 30*time.Second))
		complete(t, s, journal.Completion{Key: kHeld, Token: ch.Token, Status: journal.StatusFailedRetryable, HoldFor: time.Hour})
		list, err = s.ListIdleRetryable(ctx(t), 0, 10)
		require.NoError(t, err)
		for _, r := range list {
			require.NotEqual(t, kHeld, r.Key, "held, not idle")
		}
		// Claimed again, it is no longer idle.
		require.Equal(t, journal.Execute, claim(t, s, req(kRetry, hashA, other, 30*time.Second)).Decision)
		list, err = s.ListIdleRetryable(ctx(t), 0, 10)
		require.NoError(t, err)
		require.Empty(t, list)
	})

	parallel(t, newStore, "GetUnknownKey", func(t *testing.T, s journal.Store) {
		_, err := s.Get(ctx(t), "test:payment.charge:none:v1")
		require.ErrorIs(t, err, journal.ErrNotFound)
		att, err := s.Attempts(ctx(t), "test:payment.charge:none:v1")
		require.NoError(t, err)
		require.Empty(t, att)
	})
}
