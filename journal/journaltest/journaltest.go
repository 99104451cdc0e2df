// Package journaltest is the conformance suite every journal.Store must pass:
// every claim decision, fencing, leases on the database clock, batches, the
// attempts trail, take-over for reconciliation, operator resolution and
// retention. Each engine's tests call Exercise with a constructor.
package journaltest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// Features declares what an engine does differently. A difference is
// declared here, never left to diverge silently.
type Features struct {
	// ConcurrentTakeOver: several TakeOverStale callers run at once and split
	// the work (PostgreSQL SKIP LOCKED). Engines with one writer serialise them.
	ConcurrentTakeOver bool
}

// NewStore returns a fresh, empty store; the suite closes nothing itself.
type NewStore func(t *testing.T) journal.Store

const (
	owner = "worker-a"
	other = "worker-b"
	hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

var keySeq atomic.Int64

// key returns a key unique within the process.
func key(t *testing.T) string {
	return fmt.Sprintf("test:payment.charge:%s-%d:v1", t.Name()[len(t.Name())-min(len(t.Name()), 40):], keySeq.Add(1))
}

func req(k, hash, who string, ttl time.Duration) journal.ClaimRequest {
	return journal.ClaimRequest{
		Key: k, OperationType: "payment.charge", RequestHash: hash, TargetSystem: "payments",
		EventID: "evt-" + k, ApprovalID: "appr-1", Owner: who, LeaseTTL: ttl,
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func claim(t *testing.T, s journal.Store, r journal.ClaimRequest) journal.Claim {
	t.Helper()
	c, err := journal.ClaimOne(ctx(t), s, r)
	require.NoError(t, err)
	return c
}

// waitExpired waits until the database clock passes the lease of key.
func waitExpired(t *testing.T, s journal.Store, key string) {
	t.Helper()
	rec, err := s.Get(ctx(t), key)
	require.NoError(t, err)
	require.False(t, rec.LeaseUntil.IsZero(), "no lease on %s", key)
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		if now.After(rec.LeaseUntil) {
			return
		}
		require.True(t, time.Now().Before(deadline), "lease of %s never expired", key)
		time.Sleep(rec.LeaseUntil.Sub(now) + time.Millisecond)
	}
}

// Exercise runs the whole suite against stores made by newStore.
func Exercise(t *testing.T, newStore NewStore, f Features) {
	t.Run("NewKeyExecutes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
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

	t.Run("FieldDigestsOfTheFirstRequest", func(t *testing.T) {
		t.Parallel()
		exerciseFieldDigests(t, newStore(t))
	})

	t.Run("LiveLeaseIsInProgress", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		require.Equal(t, journal.Execute, claim(t, s, req(k, hashA, owner, 30*time.Second)).Decision)
		c := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.InProgress, c.Decision)
		require.Zero(t, c.Token)
		require.Equal(t, owner, c.Record.LeaseOwner)
	})

	t.Run("OtherHashConflictsInEveryState", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, end := range []journal.Status{journal.StatusStarted, journal.StatusSucceeded, journal.StatusFailedFinal, journal.StatusFailedRetryable, journal.StatusUnknown} {
			k := key(t)
			c := claim(t, s, req(k, hashA, owner, 30*time.Second))
			if end != journal.StatusStarted {
				require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, end)))
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

	t.Run("SucceededReplays", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		res := json.RawMessage(`{"business_status":"succeeded"}`)
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{
			Key: k, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_1", Result: res, TargetRequestID: "req-1",
		}))
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

	t.Run("FailedFinalReplays", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{
			Key: k, Token: c.Token, Status: journal.StatusFailedFinal, ErrorCode: "insufficient_funds",
		}))
		got := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.ReplayFailed, got.Decision)
		require.Equal(t, "insufficient_funds", got.Record.ErrorCode)
	})

	t.Run("RetryableFailureReclaimedOnce", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusFailedRetryable, ErrorCode: "http_503"}))
		var wg sync.WaitGroup
		results := make([]journal.Claim, 10)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := journal.ClaimOne(context.Background(), s, req(k, hashA, fmt.Sprintf("w%d", i), 30*time.Second))
				require.NoError(t, err)
				results[i] = got
			}()
		}
		wg.Wait()
		executes := 0
		for _, r := range results {
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

	t.Run("FiftyClaimersOneExecute", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
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

	t.Run("UnknownIsReconciledWithNewToken", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusUnknown, ErrorCode: "timeout_after_request_sent"}))
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
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: got.Token, Status: journal.StatusSucceeded, TargetObjectID: "inv-1", Reconciled: true, Note: "reconciled: found"}))
		require.Equal(t, journal.ReplaySucceeded, claim(t, s, req(k, hashA, owner, 30*time.Second)).Decision)
	})

	t.Run("ExpiredLeaseTakenOverAndOldTokenFenced", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 50*time.Millisecond))
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
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, got.Token, journal.StatusSucceeded)))
	})

	t.Run("HeartbeatExtendsOnDatabaseClock", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 5*time.Second))
		require.NoError(t, journal.HeartbeatOne(ctx(t), s, journal.LeaseRef{Key: k, Token: c.Token}, time.Hour))
		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.WithinDuration(t, now.Add(time.Hour), rec.LeaseUntil, 5*time.Second)
		require.ErrorIs(t, journal.HeartbeatOne(ctx(t), s, journal.LeaseRef{Key: k, Token: c.Token + 1}, time.Hour), journal.ErrStaleToken)
		// A finished operation has no lease to extend.
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusSucceeded)))
		require.ErrorIs(t, journal.HeartbeatOne(ctx(t), s, journal.LeaseRef{Key: k, Token: c.Token}, time.Hour), journal.ErrStaleToken)
	})

	t.Run("CompletionTransitions", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusSucceeded)))
		// The same completion again (a retry after a commit that seemed to fail) is applied once.
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusSucceeded)))
		// Terminal states do not move.
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusFailedFinal)), journal.ErrIllegalTransition)
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)), journal.ErrIllegalTransition)
		// A failed_retryable operation cannot be completed without a new claim.
		k2 := key(t)
		c2 := claim(t, s, req(k2, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k2, c2.Token, journal.StatusFailedRetryable)))
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(k2, c2.Token, journal.StatusSucceeded)), journal.ErrIllegalTransition)
		// Unknown keys and invalid requests.
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion("test:x:nope:v1", 1, journal.StatusSucceeded)), journal.ErrNotFound)
		_, err := s.Complete(ctx(t), []journal.Completion{{Key: k, Token: c.Token, Status: journal.StatusStarted}})
		require.ErrorIs(t, err, journal.ErrInvalid)
		_, err = s.Complete(ctx(t), []journal.Completion{{Key: k, Token: c.Token, Status: journal.StatusSucceeded, Result: json.RawMessage(`{bad`)}})
		require.ErrorIs(t, err, journal.ErrInvalid)
		_, err = s.Claim(ctx(t), []journal.ClaimRequest{{Key: k}})
		require.ErrorIs(t, err, journal.ErrInvalid)
	})

	t.Run("BatchDecidesEachKey", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		kNew, kDone, kFailed, kRetry, kLive, kConflict, kUnknown := key(t), key(t), key(t), key(t), key(t), key(t), key(t)
		for _, k := range []string{kDone, kFailed, kRetry, kLive, kConflict, kUnknown} {
			c := claim(t, s, req(k, hashA, owner, 30*time.Second))
			switch k {
			case kDone:
				require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusSucceeded)))
			case kFailed:
				require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusFailedFinal)))
			case kRetry:
				require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusFailedRetryable)))
			case kUnknown:
				require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)))
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

	t.Run("BatchDuplicatesKeepTheirOwnContent", func(t *testing.T) {
		// Copies of one intent in one batch are decided once, but a copy
		// with other content is a conflict whatever the first copy saw.
		t.Parallel()
		s := newStore(t)
		kNew, kDone, kLive := key(t), key(t), key(t)
		c := claim(t, s, req(kDone, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(kDone, c.Token, journal.StatusSucceeded)))
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

	t.Run("AttemptsTrailIsComplete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c1 := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c1.Token, Status: journal.StatusFailedRetryable, ErrorCode: "http_503", TargetRequestID: "rq-1"}))
		c2 := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Execute, c2.Decision)
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c2.Token, Status: journal.StatusUnknown, ErrorCode: "timeout_after_request_sent", TargetRequestID: "rq-2"}))
		c3 := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.Equal(t, journal.Reconcile, c3.Decision)
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c3.Token, Status: journal.StatusSucceeded, TargetObjectID: "inv-9", Reconciled: true, Note: "found by key"}))
		// A replay adds nothing to the trail.
		require.Equal(t, journal.ReplaySucceeded, claim(t, s, req(k, hashA, other, 30*time.Second)).Decision)

		att, err := s.Attempts(ctx(t), k)
		require.NoError(t, err)
		require.Len(t, att, 3)
		want := []struct {
			attempt int
			token   int64
			worker  string
			kind    journal.AttemptKind
			outcome journal.AttemptOutcome
			code    string
			reqID   string
		}{
			{1, c1.Token, owner, journal.KindExecute, journal.OutcomeFailedRetryable, "http_503", "rq-1"},
			{2, c2.Token, other, journal.KindExecute, journal.OutcomeUnknown, "timeout_after_request_sent", "rq-2"},
			{2, c3.Token, owner, journal.KindReconcile, journal.OutcomeSucceeded, "", ""},
		}
		for i, w := range want {
			a := att[i]
			require.Equal(t, k, a.Key)
			require.Equal(t, w.attempt, a.Attempt, "attempt %d", i)
			require.Equal(t, w.token, a.Token, "attempt %d", i)
			require.Equal(t, w.worker, a.Worker, "attempt %d", i)
			require.Equal(t, w.kind, a.Kind, "attempt %d", i)
			require.Equal(t, w.outcome, a.Outcome, "attempt %d", i)
			require.Equal(t, w.code, a.ErrorCode, "attempt %d", i)
			require.Equal(t, w.reqID, a.TargetRequestID, "attempt %d", i)
			require.False(t, a.StartedAt.IsZero())
			require.False(t, a.FinishedAt.IsZero())
			require.False(t, a.FinishedAt.Before(a.StartedAt))
		}
		require.Equal(t, "found by key", att[2].Note)
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, "inv-9", rec.TargetObjectID)
		require.Equal(t, 2, rec.AttemptCount)
	})

	t.Run("TakeOverStale", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		kUnknown, kExpired, kLive, kDone := key(t), key(t), key(t), key(t)
		cu := claim(t, s, req(kUnknown, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(kUnknown, cu.Token, journal.StatusUnknown)))
		ce := claim(t, s, req(kExpired, hashA, owner, 50*time.Millisecond))
		claim(t, s, req(kLive, hashA, owner, time.Hour))
		cd := claim(t, s, req(kDone, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(kDone, cd.Token, journal.StatusSucceeded)))
		waitExpired(t, s, kExpired)

		got, err := s.TakeOverStale(ctx(t), "reconciler-1", 30*time.Second, 100)
		require.NoError(t, err)
		taken := map[string]journal.Claim{}
		for _, c := range got {
			taken[c.Record.Key] = c
		}
		require.Contains(t, taken, kUnknown)
		require.Contains(t, taken, kExpired)
		require.NotContains(t, taken, kLive)
		require.NotContains(t, taken, kDone)
		require.Greater(t, taken[kExpired].Token, ce.Token)
		require.Equal(t, journal.Reconcile, taken[kExpired].Decision)
		require.Equal(t, "reconciler-1", taken[kExpired].Record.LeaseOwner)
		// Now leased: not taken again.
		again, err := s.TakeOverStale(ctx(t), "reconciler-2", 30*time.Second, 100)
		require.NoError(t, err)
		for _, c := range again {
			require.NotEqual(t, kUnknown, c.Record.Key)
			require.NotEqual(t, kExpired, c.Record.Key)
		}
		// An indeterminate lookup keeps it unknown and counts a round.
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: kUnknown, Token: taken[kUnknown].Token, Status: journal.StatusUnknown, Reconciled: true}))
		rec, err := s.Get(ctx(t), kUnknown)
		require.NoError(t, err)
		require.Equal(t, 1, rec.ReconcileRounds)
		list, err := s.ListUnresolved(ctx(t), 1, 10)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, kUnknown, list[0].Key)
		list, err = s.ListUnresolved(ctx(t), 2, 10)
		require.NoError(t, err)
		require.Empty(t, list)
	})

	t.Run("HeldUnknownWaitsOutItsHold", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		hold := journal.Completion{Key: k, Token: c.Token, Status: journal.StatusUnknown, HoldFor: 300 * time.Millisecond}
		require.NoError(t, journal.CompleteOne(ctx(t), s, hold))
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

	t.Run("IdleRetryableListed", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		kRetry, kDone, kUnknown := key(t), key(t), key(t)
		for k, st := range map[string]journal.Status{kRetry: journal.StatusFailedRetryable, kDone: journal.StatusSucceeded, kUnknown: journal.StatusUnknown} {
			c := claim(t, s, req(k, hashA, owner, 30*time.Second))
			require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, st)))
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
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: kHeld, Token: ch.Token, Status: journal.StatusFailedRetryable, HoldFor: time.Hour}))
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

	t.Run("ConcurrentTakeOverSplitsWork", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 20
		keys := make(map[string]bool, n)
		for range n {
			k := key(t)
			keys[k] = true
			c := claim(t, s, req(k, hashA, owner, 30*time.Second))
			require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)))
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					got, err := s.TakeOverStale(context.Background(), fmt.Sprintf("rec-%d", i), 30*time.Second, 3)
					if !assertNoError(t, err) || len(got) == 0 {
						return
					}
					mu.Lock()
					for _, c := range got {
						seen[c.Record.Key]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Len(t, seen, n)
		for k, times := range seen {
			require.True(t, keys[k])
			require.Equal(t, 1, times, "%s taken over %d times", k, times)
		}
		_ = f.ConcurrentTakeOver // engines without it still never hand a key out twice
	})

	t.Run("OperatorResolve", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		res := journal.Resolution{Key: k, Status: journal.StatusSucceeded, TargetObjectID: "inv-7", Evidence: "found in 1C by accountant", Operator: "alice"}
		// Refused while a live execute holds it: a call may be in flight.
		_, err := s.Resolve(ctx(t), res)
		require.ErrorIs(t, err, journal.ErrLeaseHeld)
		require.ErrorIs(t, err, journal.ErrIllegalTransition)
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)))
		_, err = s.Resolve(ctx(t), journal.Resolution{Key: k, Status: journal.StatusSucceeded, Evidence: "x", Operator: "alice"})
		require.ErrorIs(t, err, journal.ErrInvalid, "succeeded needs an object id")
		rec, err := s.Resolve(ctx(t), res)
		require.NoError(t, err)
		require.Equal(t, journal.StatusSucceeded, rec.Status)
		require.Equal(t, "inv-7", rec.TargetObjectID)
		require.Greater(t, rec.LeaseToken, c.Token, "a late reconciler is fenced off")
		// Refused once terminal, and not as a held lease.
		_, err = s.Resolve(ctx(t), res)
		require.ErrorIs(t, err, journal.ErrIllegalTransition)
		require.NotErrorIs(t, err, journal.ErrLeaseHeld)
		att, err := s.Attempts(ctx(t), k)
		require.NoError(t, err)
		last := att[len(att)-1]
		require.Equal(t, journal.KindOperator, last.Kind)
		require.Equal(t, "alice", last.Worker)
		require.Equal(t, "found in 1C by accountant", last.Note)
		require.Equal(t, journal.OutcomeSucceeded, last.Outcome)
		_, err = s.Resolve(ctx(t), journal.Resolution{Key: "test:x:missing:v1", Status: journal.StatusFailedFinal, Evidence: "e", Operator: "o"})
		require.ErrorIs(t, err, journal.ErrNotFound)
	})

	t.Run("OperatorResolveWinsOverReconciler", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		decide := func(k string) journal.Resolution {
			return journal.Resolution{Key: k, Status: journal.StatusSucceeded, TargetObjectID: "task-9", Evidence: "seen in the portal", Operator: "alice"}
		}
		// Held between lookup rounds: the operator does not wait for the hold.
		kHeld := key(t)
		c := claim(t, s, req(kHeld, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: kHeld, Token: c.Token, Status: journal.StatusUnknown,
			Reconciled: true, HoldFor: time.Hour}))
		rec, err := s.Resolve(ctx(t), decide(kHeld))
		require.NoError(t, err, "an operator's decision wins over a hold")
		require.Equal(t, journal.StatusSucceeded, rec.Status)

		// Taken over by a reconciler that is looking it up right now.
		kLookup := key(t)
		c = claim(t, s, req(kLookup, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(kLookup, c.Token, journal.StatusUnknown)))
		taken, err := s.TakeOverStale(ctx(t), "reconciler-1", time.Hour, 10)
		require.NoError(t, err)
		require.Len(t, taken, 1)
		rec, err = s.Resolve(ctx(t), decide(kLookup))
		require.NoError(t, err, "an operator's decision wins over a reconciler's lease")
		require.Greater(t, rec.LeaseToken, taken[0].Token)
		// The reconciler's late completion is refused and its attempt shows it.
		err = journal.CompleteOne(ctx(t), s, journal.Completion{Key: kLookup, Token: taken[0].Token, Status: journal.StatusSucceeded,
			TargetObjectID: "task-8", Reconciled: true, Note: "reconciled: found by key"})
		require.ErrorIs(t, err, journal.ErrStaleToken)
		got, err := s.Get(ctx(t), kLookup)
		require.NoError(t, err)
		require.Equal(t, "task-9", got.TargetObjectID, "the operator's decision stands")
		atts, err := s.Attempts(ctx(t), kLookup)
		require.NoError(t, err)
		byToken := map[int64]journal.Attempt{}
		for _, a := range atts {
			byToken[a.Token] = a
			require.False(t, a.FinishedAt.IsZero(), "no attempt left open: %+v", a)
		}
		rc := byToken[taken[0].Token]
		require.Equal(t, journal.OutcomeFenced, rc.Outcome)
		require.Contains(t, rc.Note, "succeeded")
		require.Contains(t, rc.Note, "task-8", "what the refused worker found is kept")
		require.Equal(t, journal.OutcomeSucceeded, byToken[rec.LeaseToken].Outcome)
		require.Equal(t, journal.KindOperator, byToken[rec.LeaseToken].Kind)

		// A retryable failure waiting for its next attempt.
		kRetry := key(t)
		c = claim(t, s, req(kRetry, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: kRetry, Token: c.Token, Status: journal.StatusFailedRetryable,
			ErrorCode: "http_503", HoldFor: time.Hour}))
		rec, err = s.Resolve(ctx(t), journal.Resolution{Key: kRetry, Status: journal.StatusFailedFinal, ErrorCode: "operator_resolved",
			Evidence: "the customer cancelled", Operator: "bob"})
		require.NoError(t, err)
		require.Equal(t, journal.StatusFailedFinal, rec.Status)
		require.Equal(t, journal.ReplayFailed, claim(t, s, req(kRetry, hashA, other, 30*time.Second)).Decision)

		// A dead owner's expired execute lease.
		kDead := key(t)
		claim(t, s, req(kDead, hashA, owner, 50*time.Millisecond))
		waitExpired(t, s, kDead)
		_, err = s.Resolve(ctx(t), decide(kDead))
		require.NoError(t, err)
		atts, err = s.Attempts(ctx(t), kDead)
		require.NoError(t, err)
		require.Equal(t, journal.OutcomeAbandoned, atts[0].Outcome, "the dead owner's attempt is closed")

		// A live execute: refused unless forced, and the trail says it was.
		kLive := key(t)
		cLive := claim(t, s, req(kLive, hashA, owner, time.Hour))
		_, err = s.Resolve(ctx(t), decide(kLive))
		require.ErrorIs(t, err, journal.ErrLeaseHeld)
		require.ErrorContains(t, err, owner, "the refusal names who holds it")
		r := decide(kLive)
		r.Force = true
		rec, err = s.Resolve(ctx(t), r)
		require.NoError(t, err)
		require.Equal(t, journal.StatusSucceeded, rec.Status)
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(kLive, cLive.Token, journal.StatusFailedRetryable)), journal.ErrStaleToken)
		atts, err = s.Attempts(ctx(t), kLive)
		require.NoError(t, err)
		require.Equal(t, journal.OutcomeFenced, atts[0].Outcome)
		op := atts[len(atts)-1]
		require.Equal(t, journal.KindOperator, op.Kind)
		require.Contains(t, op.Note, "forced over the live execute of "+owner)
	})

	t.Run("RetryableHoldIsNotBefore", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusFailedRetryable,
			ErrorCode: "http_503", HoldFor: 400 * time.Millisecond}))
		// Copies and redeliveries before the hold ends take no attempt: they
		// are told to come back, with the wait on the database clock.
		for _, who := range []string{other, "worker-c", owner} {
			got := claim(t, s, req(k, hashA, who, 30*time.Second))
			require.Equal(t, journal.InProgress, got.Decision)
			require.Zero(t, got.Token)
			require.Equal(t, journal.StatusFailedRetryable, got.Record.Status)
			require.Positive(t, got.Wait())
			require.LessOrEqual(t, got.Wait(), 400*time.Millisecond)
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
		results := make([]journal.Claim, 5)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				got, err := journal.ClaimOne(context.Background(), s, req(k, hashA, fmt.Sprintf("w%d", i), 30*time.Second))
				if assertNoError(t, err) {
					results[i] = got
				}
			})
		}
		wg.Wait()
		executes := 0
		for _, r := range results {
			if r.Decision == journal.Execute {
				executes++
				require.Equal(t, 2, r.Attempt)
				require.False(t, r.Now.Before(att[0].FinishedAt.Add(400*time.Millisecond)),
					"the attempt began at %v, before the hold ended (%v + 400ms)", r.Now, att[0].FinishedAt)
			}
		}
		require.Equal(t, 1, executes)
	})

	t.Run("ClaimCarriesTheDatabaseClock", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		require.WithinDuration(t, now, c.Now, 5*time.Second)
		require.False(t, c.Now.Before(c.Record.CreatedAt))
		require.GreaterOrEqual(t, c.Age(), time.Duration(0))
		require.WithinDuration(t, c.Now.Add(30*time.Second), c.Record.LeaseUntil, time.Second)
		live := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.InProgress, live.Decision)
		require.InDelta(t, float64(30*time.Second), float64(live.Wait()), float64(5*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)))
		taken, err := s.TakeOverStale(ctx(t), "reconciler-1", 30*time.Second, 10)
		require.NoError(t, err)
		require.Len(t, taken, 1)
		require.WithinDuration(t, now, taken[0].Now, 5*time.Second)
	})

	t.Run("TakeOverClosesOpenAttempts", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// An owner dies mid-call: its attempt stays open until the take-over
		// closes it as abandoned; if it comes back, it is fenced.
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 50*time.Millisecond))
		waitExpired(t, s, k)
		got := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Reconcile, got.Decision)
		require.True(t, got.Record.EffectPossible, "an owner that died mid-call may have had an effect")
		att, err := s.Attempts(ctx(t), k)
		require.NoError(t, err)
		require.Len(t, att, 2)
		require.Equal(t, journal.OutcomeAbandoned, att[0].Outcome)
		require.False(t, att[0].FinishedAt.IsZero())
		require.Empty(t, att[1].Outcome, "the new owner's attempt is open")
		err = journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusSucceeded,
			TargetObjectID: "pay_7", TargetRequestID: "rq-7"})
		require.ErrorIs(t, err, journal.ErrStaleToken)
		att, err = s.Attempts(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, journal.OutcomeFenced, att[0].Outcome, "the worker came back: fenced, with what it found")
		require.Contains(t, att[0].Note, "pay_7")
		require.Equal(t, "rq-7", att[0].TargetRequestID)
		require.Empty(t, att[1].Outcome, "a refused completion leaves the new owner's attempt alone")

		// The reconciler's scan closes them too.
		k2 := key(t)
		claim(t, s, req(k2, hashA, owner, 50*time.Millisecond))
		waitExpired(t, s, k2)
		taken, err := s.TakeOverStale(ctx(t), "reconciler-1", 30*time.Second, 10)
		require.NoError(t, err)
		require.Len(t, taken, 1)
		require.True(t, taken[0].Record.EffectPossible)
		att, err = s.Attempts(ctx(t), k2)
		require.NoError(t, err)
		require.Equal(t, journal.OutcomeAbandoned, att[0].Outcome)
		// A take-over of an unknown row that a reconciler dropped closes its
		// open attempt as well.
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k2, taken[0].Token, journal.StatusUnknown)))
		require.Equal(t, journal.Reconcile, claim(t, s, req(k2, hashA, other, 30*time.Second)).Decision)
		att, err = s.Attempts(ctx(t), k2)
		require.NoError(t, err)
		for _, a := range att[:len(att)-1] {
			require.False(t, a.FinishedAt.IsZero(), "only the current lease's attempt is open: %+v", a)
			require.True(t, a.Outcome.Valid())
		}
	})

	t.Run("EffectPossibleOnceUnknown", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k := key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.False(t, c.Record.EffectPossible)
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusFailedRetryable)))
		c = claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.Equal(t, journal.Execute, c.Decision)
		require.False(t, c.Record.EffectPossible, "a retryable answer proves nothing was done")
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)))
		c = claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Reconcile, c.Decision)
		require.True(t, c.Record.EffectPossible)
		// Not found by the lookup: retried, and it stays possible.
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusFailedRetryable, Reconciled: true}))
		c = claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Execute, c.Decision)
		require.Equal(t, 3, c.Attempt)
		require.True(t, c.Record.EffectPossible, "a lookup that found nothing yet does not clear it")
	})

	t.Run("ReviewHistoryKept", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		k, kDone := key(t), key(t)
		c := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)))
		for range 3 {
			got := claim(t, s, req(k, hashA, other, 30*time.Second))
			require.Equal(t, journal.Reconcile, got.Decision)
			require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: got.Token, Status: journal.StatusUnknown, Reconciled: true}))
			c = got
		}
		cd := claim(t, s, req(kDone, hashA, owner, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(kDone, cd.Token, journal.StatusSucceeded)))
		raised, err := s.RaiseForReview(ctx(t), []string{k, kDone, "test:x:missing:v1"})
		require.NoError(t, err)
		require.Equal(t, []string{k}, raised, "only an unknown operation is raised")
		raised, err = s.RaiseForReview(ctx(t), []string{k})
		require.NoError(t, err)
		require.Empty(t, raised, "raised once")
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, 3, rec.ReconcileRounds)
		require.Equal(t, 3, rec.ReconcileRoundsTotal)
		require.False(t, rec.RaisedAt.IsZero())
		raisedAt := rec.RaisedAt
		// Settled at last: the current count restarts, the history stays.
		got := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.NoError(t, journal.CompleteOne(ctx(t), s, journal.Completion{Key: k, Token: got.Token, Status: journal.StatusSucceeded,
			TargetObjectID: "inv-1", Reconciled: true}))
		rec, err = s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Zero(t, rec.ReconcileRounds)
		require.Equal(t, 3, rec.ReconcileRoundsTotal)
		require.True(t, raisedAt.Equal(rec.RaisedAt), "when it was raised is kept")
		list, err := s.ListUnresolved(ctx(t), 1, 10)
		require.NoError(t, err)
		require.Empty(t, list)
	})

	t.Run("PurgeRemovesTerminalRowsOnly", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		byStatus := map[journal.Status]string{}
		for _, st := range []journal.Status{journal.StatusStarted, journal.StatusSucceeded, journal.StatusFailedFinal, journal.StatusFailedRetryable, journal.StatusUnknown} {
			k := key(t)
			byStatus[st] = k
			c := claim(t, s, req(k, hashA, owner, 50*time.Millisecond))
			if st != journal.StatusStarted {
				require.NoError(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, st)))
			}
		}
		// An expired started lease is still not purged: its outcome is unknown.
		waitExpired(t, s, byStatus[journal.StatusStarted])
		// Another operation type is kept by a typed purge.
		otherType := key(t)
		r := req(otherType, hashA, owner, time.Minute)
		r.OperationType = "invoice.create"
		c := claim(t, s, r)
		require.NoError(t, journal.CompleteOne(ctx(t), s, completion(otherType, c.Token, journal.StatusSucceeded)))

		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		n, err := s.Purge(ctx(t), "payment.charge", now.Add(-time.Hour))
		require.NoError(t, err)
		require.Zero(t, n, "nothing completed an hour ago")
		n, err = s.Purge(ctx(t), "payment.charge", now.Add(time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		for st, k := range byStatus {
			_, err := s.Get(ctx(t), k)
			if st.Terminal() {
				require.ErrorIs(t, err, journal.ErrNotFound, st)
				att, err := s.Attempts(ctx(t), k)
				require.NoError(t, err)
				require.Empty(t, att, "attempts leave with their operation")
			} else {
				require.NoError(t, err, "%s must survive purge", st)
			}
		}
		_, err = s.Get(ctx(t), otherType)
		require.NoError(t, err)
		n, err = s.Purge(ctx(t), "", now.Add(time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		// A purged key is a new operation again (the article's retention warning).
		require.Equal(t, journal.Execute, claim(t, s, req(byStatus[journal.StatusSucceeded], hashA, owner, time.Minute)).Decision)
	})

	t.Run("GetUnknownKey", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Get(ctx(t), "test:payment.charge:none:v1")
		require.ErrorIs(t, err, journal.ErrNotFound)
		att, err := s.Attempts(ctx(t), "test:payment.charge:none:v1")
		require.NoError(t, err)
		require.Empty(t, att)
	})
}

func completion(k string, token int64, st journal.Status) journal.Completion {
	c := journal.Completion{Key: k, Token: token, Status: st}
	switch st {
	case journal.StatusSucceeded:
		c.TargetObjectID = "obj-" + k
		c.Result = json.RawMessage(`{"business_status":"succeeded"}`)
	case journal.StatusFailedFinal:
		c.ErrorCode = "validation_error"
	case journal.StatusFailedRetryable:
		c.ErrorCode = "http_503"
	case journal.StatusUnknown:
		c.ErrorCode = "timeout_after_request_sent"
	}
	return c
}

// assertNoError reports an error from a goroutine without FailNow.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
