package journaltest

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exerciseBatch checks batches: each key decided on its own, duplicates in one batch.
func exerciseBatch(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "BatchDecidesEachKey", func(t *testing.T, s journal.Store) {
		kNew, kDone, kFailed, kRetry, kLive, kConflict, kUnknown := key(t), key(t), key(t), key(t), key(t), key(t), key(t)
		for _, k := range []string{kDone, kFailed, kRetry, kLive, kConflict, kUnknown} {
			c := claim(t, s, req(k, hashA, owner, 30*time.Second))
			switch k {
			case kDone:
				complete(t, s, completion(k, c.Token, journal.StatusSucceeded))
			case kFailed:
				complete(t, s, completion(k, c.Token, journal.StatusFailedFinal))
			case kRetry:
				complete(t, s, completion(k, c.Token, journal.StatusFailedRetryable))
			case kUnknown:
				complete(t, s, completion(k, c.Token, journal.StatusUnknown))
			}
		}
		batch := []journal.ClaimRequest{
			req(kUnknown, hashA, other, 30*time.Second),
			req(kNew, hashA, other, 30*time.Second),
			req(kDone, hashA, other, 30*time.Second),
			req(kFailed, hashA, other, 30*time.Second),
			req(kRetry, hashA, other, 30*time.Second),
			req(kLive, hashA, other, 30*time.Second),
			req(kConflict, hashB, other, 30*time.Second),
			req(kNew, hashA, other, 30*time.Second), // a duplicate within the batch
		}
		got, err := s.Claim(ctx(t), batch)
		require.NoError(t, err)
		require.Len(t, got, len(batch))
		want := []journal.Decision{journal.Reconcile, journal.Execute, journal.ReplaySucceeded, journal.ReplayFailed,
			journal.Execute, journal.InProgress, journal.Conflict, journal.InProgress}
		for i, w := range want {
			require.Equal(t, w, got[i].Decision, "item %d (%s)", i, batch[i].Key)
			require.Equal(t, batch[i].Key, got[i].Record.Key, "results align with requests")
		}
		require.Equal(t, 2, got[4].Attempt)

		// Completions in one batch, with per-item errors.
		errs, err := s.Complete(ctx(t), []journal.Completion{
			completion(kNew, got[1].Token, journal.StatusSucceeded),
			completion(kRetry, got[4].Token+100, journal.StatusSucceeded),
			completion(kUnknown, got[0].Token, journal.StatusSucceeded),
			completion(kDone, 1, journal.StatusFailedFinal),
		})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], journal.ErrStaleToken)
		require.NoError(t, errs[2])
		require.ErrorIs(t, errs[3], journal.ErrIllegalTransition)
	})

	// Copies of one intent in one batch are decided once, but a copy with
	// other content is a conflict whatever the first copy saw.
	parallel(t, newStore, "BatchDuplicatesKeepTheirOwnContent", func(t *testing.T, s journal.Store) {
		kNew, kDone, kLive := key(t), key(t), key(t)
		finished(t, s, kDone, journal.StatusSucceeded)
		claim(t, s, req(kLive, hashA, owner, 30*time.Second))
		batch := []journal.ClaimRequest{
			req(kNew, hashA, other, 30*time.Second),
			req(kNew, hashB, other, 30*time.Second), // other content, same key, new row
			req(kNew, hashA, other, 30*time.Second),
			req(kDone, hashB, other, 30*time.Second), // the first copy conflicts...
			req(kDone, hashA, other, 30*time.Second), // ...this one replays
			req(kDone, hashB, other, 30*time.Second),
			req(kLive, hashA, other, 30*time.Second),
			req(kLive, hashB, other, 30*time.Second),
		}
		got, err := s.Claim(ctx(t), batch)
		require.NoError(t, err)
		want := []journal.Decision{journal.Execute, journal.Conflict, journal.InProgress,
			journal.Conflict, journal.ReplaySucceeded, journal.Conflict, journal.InProgress, journal.Conflict}
		for i, w := range want {
			require.Equal(t, w, got[i].Decision, "item %d (%s, hash %.1s)", i, batch[i].Key, batch[i].RequestHash)
			require.Equal(t, batch[i].Key, got[i].Record.Key, "results align with requests")
		}
		require.Equal(t, hashA, got[1].Record.RequestHash, "a conflict carries the row's fingerprint")
	})
}
