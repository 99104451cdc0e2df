package journaltest

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exerciseResolve checks operator resolution and review: the decision wins over a late reconciler; the review history is kept.
func exerciseResolve(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "OperatorResolve", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		res := journal.Resolution{Key: k, Status: journal.StatusSucceeded, TargetObjectID: "inv-7", Evidence: "found in 1C by accountant; paid by card 4111 1111 1111 1111, key sk_live_4eC39HqLyjWDarjtT1", Operator: "alice"}
		// Refused while a live execute holds it: a call may be in flight.
		_, err := s.Resolve(ctx(t), res)
		require.ErrorIs(t, err, journal.ErrLeaseHeld)
		require.ErrorIs(t, err, journal.ErrIllegalTransition)
		complete(t, s, completion(k, c.Token, journal.StatusUnknown))
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
		// The evidence is masked as every face masks free text: what the
		// operator pasted from the target never lands in the journal.
		require.Equal(t, "found in 1C by accountant; paid by card 4111 11** **** 1111, key [REDACTED]", last.Note)
		require.Equal(t, journal.OutcomeSucceeded, last.Outcome)
		_, err = s.Resolve(ctx(t), journal.Resolution{Key: "test:x:missing:v1", Status: journal.StatusFailedFinal, Evidence: "e", Operator: "o"})
		require.ErrorIs(t, err, journal.ErrNotFound)
	})

	parallel(t, newStore, "OperatorResolveWinsOverReconciler", func(t *testing.T, s journal.Store) {
		decide := func(k string) journal.Resolution {
			return journal.Resolution{Key: k, Status: journal.StatusSucceeded, TargetObjectID: "task-9", Evidence: "seen in the portal", Operator: "alice"}
		}
		// Held between lookup rounds: the operator does not wait for the hold.
		kHeld := key(t)
		c := claim(t, s, req(kHeld, hashA, owner, 30*time.Second))
		complete(t, s, journal.Completion{Key: kHeld, Token: c.Token, Status: journal.StatusUnknown,
			Reconciled: true, HoldFor: time.Hour})
		rec, err := s.Resolve(ctx(t), decide(kHeld))
		require.NoError(t, err, "an operator's decision wins over a hold")
		require.Equal(t, journal.StatusSucceeded, rec.Status)

		// Taken over by a reconciler that is looking it up right now.
		kLookup := key(t)
		c = claim(t, s, req(kLookup, hashA, owner, 30*time.Second))
		complete(t, s, completion(kLookup, c.Token, journal.StatusUnknown))
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
		complete(t, s, journal.Completion{Key: kRetry, Token: c.Token, Status: journal.StatusFailedRetryable,
			ErrorCode: "http_503", HoldFor: time.Hour})
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

	parallel(t, newStore, "ReviewHistoryKept", func(t *testing.T, s journal.Store) {
		k, kDone := key(t), key(t)
		finished(t, s, k, journal.StatusUnknown)
		for range 3 {
			got := claim(t, s, req(k, hashA, other, 30*time.Second))
			require.Equal(t, journal.Reconcile, got.Decision)
			complete(t, s, journal.Completion{Key: k, Token: got.Token, Status: journal.StatusUnknown, Reconciled: true})
		}
		finished(t, s, kDone, journal.StatusSucceeded)
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
		complete(t, s, journal.Completion{Key: k, Token: got.Token, Status: journal.StatusSucceeded,
			TargetObjectID: "inv-1", Reconciled: true})
		rec, err = s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Zero(t, rec.ReconcileRounds)
		require.Equal(t, 3, rec.ReconcileRoundsTotal)
		require.True(t, raisedAt.Equal(rec.RaisedAt), "when it was raised is kept")
		list, err := s.ListUnresolved(ctx(t), 1, 10)
		require.NoError(t, err)
		require.Empty(t, list)
	})
}
