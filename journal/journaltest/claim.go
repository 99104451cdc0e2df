package journaltest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exerciseClaim checks claims: every decision of a single key, copies racing for one key, and the database clock a claim carries.
func exerciseClaim(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "NewKeyExecutes", func(t *testing.T, s journal.Store) {
		k := key(t)
		before, err := s.Now(ctx(t))
		require.NoError(t, err)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.Equal(t, journal.Execute, c.Decision)
		require.Positive(t, c.Token)
		require.Equal(t, 1, c.Attempt)
		require.Equal(t, journal.StatusStarted, c.Record.Status)
		require.Equal(t, owner, c.Record.LeaseOwner)
		require.Equal(t, "evt-"+k, c.Record.EventID)
		require.Equal(t, "appr-1", c.Record.ApprovalID)
		// The lease is measured on the database clock.
		require.WithinDuration(t, before.Add(30*time.Second), c.Record.LeaseUntil, 5*time.Second)
	})

	parallel(t, newStore, "FieldDigestsOfTheFirstRequest", exerciseFieldDigests)

	parallel(t, newStore, "LiveLeaseIsInProgress", func(t *testing.T, s journal.Store) {
		k := key(t)
		require.Equal(t, journal.Execute, claim(t, s, req(k, hashA, owner, 30*time.Second)).Decision)
		c := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.InProgress, c.Decision)
		require.Zero(t, c.Token)
		require.Equal(t, owner, c.Record.LeaseOwner)
	})

	parallel(t, newStore, "OtherHashConflictsInEveryState", func(t *testing.T, s journal.Store) {
		for _, end := range []journal.Status{journal.StatusStarted, journal.StatusSucceeded, journal.StatusFailedFinal, journal.StatusFailedRetryable, journal.StatusUnknown} {
			k := key(t)
			c := claim(t, s, req(k, hashA, owner, 30*time.Second))
			if end != journal.StatusStarted {
				complete(t, s, completion(k, c.Token, end))
			}
			got := claim(t, s, req(k, hashB, other, 30*time.Second))
			require.Equal(t, journal.Conflict, got.Decision, "state %s", end)
			require.Zero(t, got.Token)
			rec, err := s.Get(ctx(t), k)
			require.NoError(t, err)
			require.Equal(t, end, rec.Status, "a conflict changes nothing")
			require.Equal(t, hashA, rec.RequestHash)
		}
	})

	parallel(t, newStore, "SucceededReplays", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		res := json.RawMessage(`{"business_status":"succeeded"}`)
		complete(t, s, journal.Completion{
			Key: k, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_1", Result: res, TargetRequestID: "req-1",
		})
		for range 3 {
			got := claim(t, s, req(k, hashA, other, 30*time.Second))
			require.Equal(t, journal.ReplaySucceeded, got.Decision)
			require.Equal(t, "pay_1", got.Record.TargetObjectID)
			require.JSONEq(t, string(res), string(got.Record.Result))
			require.Equal(t, 1, got.Record.AttemptCount)
			require.False(t, got.Record.CompletedAt.IsZero())
			require.True(t, got.Record.LeaseUntil.IsZero(), "a finished operation holds no lease")
		}
	})

	parallel(t, newStore, "FailedFinalReplays", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		complete(t, s, journal.Completion{
			Key: k, Token: c.Token, Status: journal.StatusFailedFinal, ErrorCode: "insufficient_funds",
		})
		got := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.ReplayFailed, got.Decision)
		require.Equal(t, "insufficient_funds", got.Record.ErrorCode)
	})

	parallel(t, newStore, "RetryableFailureReclaimedOnce", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		complete(t, s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusFailedRetryable, ErrorCode: "http_503"})
		executes := 0
		for _, r := range claimAtOnce(t, s, k, 10) {
			if r.Decision == journal.Execute {
				executes++
				require.Equal(t, 2, r.Attempt)
				require.Greater(t, r.Token, c.Token)
			} else {
				require.Equal(t, journal.InProgress, r.Decision)
			}
		}
		require.Equal(t, 1, executes)
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, 2, rec.AttemptCount)
		require.Equal(t, journal.StatusStarted, rec.Status)
	})

	parallel(t, newStore, "FiftyClaimersOneExecute", func(t *testing.T, s journal.Store) {
		k := key(t)
		var wg sync.WaitGroup
		var executes, inProgress atomic.Int64
		tokens := make(chan int64, 50)
		start := make(chan struct{})
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got, err := journal.ClaimOne(context.Background(), s, req(k, hashA, fmt.Sprintf("w%d", i), 30*time.Second))
				if !assertNoError(t, err) {
					return
				}
				switch got.Decision {
				case journal.Execute:
					executes.Add(1)
					tokens <- got.Token
				case journal.InProgress:
					inProgress.Add(1)
				default:
					t.Errorf("unexpected decision %s", got.Decision)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, executes.Load())
		require.EqualValues(t, 49, inProgress.Load())
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, <-tokens, rec.LeaseToken)
		att, err := s.Attempts(ctx(t), k)
		require.NoError(t, err)
		require.Len(t, att, 1)
	})

	parallel(t, newStore, "RetryableHoldIsNotBefore", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		complete(t, s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusFailedRetryable,
			ErrorCode: "http_503", HoldFor: 2 * time.Second})
		// Copies and redeliveries before the hold ends take no attempt: they
		// are told to come back, with the wait on the database clock.
		for _, who := range []string{other, "worker-c", owner} {
			got := claim(t, s, req(k, hashA, who, 30*time.Second))
			require.Equal(t, journal.InProgress, got.Decision)
			require.Zero(t, got.Token)
			require.Equal(t, journal.StatusFailedRetryable, got.Record.Status)
			require.Positive(t, got.Wait())
			require.LessOrEqual(t, got.Wait(), 2*time.Second)
		}
		batch, err := s.Claim(ctx(t), []journal.ClaimRequest{req(k, hashA, other, 30*time.Second), req(k, hashA, owner, 30*time.Second)})
		require.NoError(t, err)
		require.Equal(t, journal.InProgress, batch[0].Decision)
		require.Equal(t, journal.InProgress, batch[1].Decision)
		taken, err := s.TakeOverStale(ctx(t), "reconciler-1", 30*time.Second, 10)
		require.NoError(t, err)
		require.Empty(t, taken, "a retryable failure is not the reconciler's")
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, 1, rec.AttemptCount, "no attempt was taken during the hold")
		att, err := s.Attempts(ctx(t), k)
		require.NoError(t, err)
		require.Len(t, att, 1)
		// Once the hold has passed, exactly one claimer takes the next attempt.
		waitExpired(t, s, k)
		executes := 0
		for _, r := range claimAtOnce(t, s, k, 5) {
			if r.Decision == journal.Execute {
				executes++
				require.Equal(t, 2, r.Attempt)
				require.False(t, r.Now.Before(att[0].FinishedAt.Add(2*time.Second)),
					"the attempt began at %v, before the hold ended (%v + 400ms)", r.Now, att[0].FinishedAt)
			}
		}
		require.Equal(t, 1, executes)
	})

	parallel(t, newStore, "ClaimCarriesTheDatabaseClock", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		require.WithinDuration(t, now, c.Now, 5*time.Second)
		require.False(t, c.Now.Before(c.Record.CreatedAt))
		require.GreaterOrEqual(t, c.Age(), time.Duration(0))
		require.WithinDuration(t, c.Now.Add(30*time.Second), c.Record.LeaseUntil, time.Second)
		live := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.InProgress, live.Decision)
		require.InDelta(t, float64(30*time.Second), float64(live.Wait()), float64(5*time.Second))
		complete(t, s, completion(k, c.Token, journal.StatusUnknown))
		taken, err := s.TakeOverStale(ctx(t), "reconciler-1", 30*time.Second, 10)
		require.NoError(t, err)
		require.Len(t, taken, 1)
		require.WithinDuration(t, now, taken[0].Now, 5*time.Second)
	})
}
