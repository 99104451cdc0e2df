package journaltest

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exerciseLease checks leases and fencing: take-over of unknown outcomes and expired leases, heartbeats and holds on the database clock.
func exerciseLease(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "UnknownIsReconciledWithNewToken", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		complete(t, s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusUnknown, ErrorCode: "timeout_after_request_sent"})
		got := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Reconcile, got.Decision)
		require.Greater(t, got.Token, c.Token)
		require.Equal(t, 1, got.Attempt, "reconciling is not a new attempt at the target")
		require.Equal(t, journal.StatusUnknown, got.Record.Status)
		require.Equal(t, other, got.Record.LeaseOwner)
		// While the reconciler holds it, others wait.
		require.Equal(t, journal.InProgress, claim(t, s, req(k, hashA, owner, 30*time.Second)).Decision)
		// Found by lookup: resolved as succeeded by the new owner only.
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "x"}), journal.ErrStaleToken)
		complete(t, s, journal.Completion{Key: k, Token: got.Token, Status: journal.StatusSucceeded, TargetObjectID: "inv-1", Reconciled: true, Note: "reconciled: found"})
		require.Equal(t, journal.ReplaySucceeded, claim(t, s, req(k, hashA, owner, 30*time.Second)).Decision)
	})

	parallel(t, newStore, "ExpiredLeaseTakenOverAndOldTokenFenced", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 50*time.Millisecond)
		waitExpired(t, s, k)
		got := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Reconcile, got.Decision)
		require.Greater(t, got.Token, c.Token)
		require.Equal(t, journal.StatusStarted, got.Record.Status)
		// The old owner wakes up: it can neither heartbeat nor complete.
		require.ErrorIs(t, journal.HeartbeatOne(ctx(t), s, journal.LeaseRef{Key: k, Token: c.Token}, time.Minute), journal.ErrStaleToken)
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusSucceeded)), journal.ErrStaleToken)
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)), journal.ErrStaleToken)
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, journal.StatusStarted, rec.Status)
		require.Equal(t, got.Token, rec.LeaseToken)
		// The new owner can.
		require.NoError(t, journal.HeartbeatOne(ctx(t), s, journal.LeaseRef{Key: k, Token: got.Token}, time.Minute))
		complete(t, s, completion(k, got.Token, journal.StatusSucceeded))
	})

	parallel(t, newStore, "HeartbeatExtendsOnDatabaseClock", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 5*time.Second)
		require.NoError(t, journal.HeartbeatOne(ctx(t), s, journal.LeaseRef{Key: k, Token: c.Token}, time.Hour))
		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.WithinDuration(t, now.Add(time.Hour), rec.LeaseUntil, 5*time.Second)
		require.ErrorIs(t, journal.HeartbeatOne(ctx(t), s, journal.LeaseRef{Key: k, Token: c.Token + 1}, time.Hour), journal.ErrStaleToken)
		// A finished operation has no lease to extend.
		complete(t, s, completion(k, c.Token, journal.StatusSucceeded))
		require.ErrorIs(t, journal.HeartbeatOne(ctx(t), s, journal.LeaseRef{Key: k, Token: c.Token}, time.Hour), journal.ErrStaleToken)
	})

	parallel(t, newStore, "HeldUnknownWaitsOutItsHold", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		hold := journal.Completion{Key: k, Token: c.Token, Status: journal.StatusUnknown, HoldFor: 2 * time.Second}
		complete(t, s, hold)
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, journal.StatusUnknown, rec.Status)
		require.False(t, rec.LeaseUntil.IsZero(), "held until the settle window ends")
		require.True(t, rec.EffectPossible)
		// Neither the reconciler nor a redelivery takes it during the hold.
		taken, err := s.TakeOverStale(ctx(t), "reconciler-1", 30*time.Second, 10)
		require.NoError(t, err)
		require.Empty(t, taken)
		require.Equal(t, journal.InProgress, claim(t, s, req(k, hashA, other, 30*time.Second)).Decision)
		waitExpired(t, s, k)
		got := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Reconcile, got.Decision)
		require.Greater(t, got.Token, c.Token)
		// Only an unknown or retryable outcome can be held.
		_, err = s.Complete(ctx(t), []journal.Completion{{Key: k, Token: got.Token, Status: journal.StatusSucceeded, TargetObjectID: "x", HoldFor: time.Second}})
		require.ErrorIs(t, err, journal.ErrInvalid)
		_, err = s.Complete(ctx(t), []journal.Completion{{Key: k, Token: got.Token, Status: journal.StatusFailedFinal, HoldFor: time.Second}})
		require.ErrorIs(t, err, journal.ErrInvalid)
	})

	parallel(t, newStore, "EffectPossibleOnceUnknown", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		require.False(t, c.Record.EffectPossible)
		complete(t, s, completion(k, c.Token, journal.StatusFailedRetryable))
		c = claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.Equal(t, journal.Execute, c.Decision)
		require.False(t, c.Record.EffectPossible, "a retryable answer proves nothing was done")
		complete(t, s, completion(k, c.Token, journal.StatusUnknown))
		c = claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Reconcile, c.Decision)
		require.True(t, c.Record.EffectPossible)
		// Not found by the lookup: retried, and it stays possible.
		complete(t, s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusFailedRetryable, Reconciled: true})
		c = claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Execute, c.Decision)
		require.Equal(t, 3, c.Attempt)
		require.True(t, c.Record.EffectPossible, "a lookup that found nothing yet does not clear it")
	})
}
