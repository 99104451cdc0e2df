package journaltest

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exerciseTrail checks the attempts trail: every attempt closed once, take-overs closing open attempts as abandoned.
func exerciseTrail(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "AttemptsTrailIsComplete", func(t *testing.T, s journal.Store) {
		k := key(t)
		c1 := claim(t, s, req(k, hashA, owner, 30*time.Second))
		complete(t, s, journal.Completion{Key: k, Token: c1.Token, Status: journal.StatusFailedRetryable, ErrorCode: "http_503", TargetRequestID: "rq-1"})
		c2 := claim(t, s, req(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.Execute, c2.Decision)
		complete(t, s, journal.Completion{Key: k, Token: c2.Token, Status: journal.StatusUnknown, ErrorCode: "timeout_after_request_sent", TargetRequestID: "rq-2"})
		c3 := claim(t, s, req(k, hashA, owner, 30*time.Second))
		require.Equal(t, journal.Reconcile, c3.Decision)
		complete(t, s, journal.Completion{Key: k, Token: c3.Token, Status: journal.StatusSucceeded, TargetObjectID: "inv-9", Reconciled: true, Note: "found by key"})
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

	parallel(t, newStore, "TakeOverClosesOpenAttempts", func(t *testing.T, s journal.Store) {
		// An owner dies mid-call: its attempt stays open until the take-over
		// closes it as abandoned; if it comes back, it is fenced.
		k, c := claimed(t, s, 50*time.Millisecond)
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
		complete(t, s, completion(k2, taken[0].Token, journal.StatusUnknown))
		require.Equal(t, journal.Reconcile, claim(t, s, req(k2, hashA, other, 30*time.Second)).Decision)
		att, err = s.Attempts(ctx(t), k2)
		require.NoError(t, err)
		for _, a := range att[:len(att)-1] {
			require.False(t, a.FinishedAt.IsZero(), "only the current lease's attempt is open: %+v", a)
			require.True(t, a.Outcome.Valid())
		}
	})

	parallel(t, newStore, "FirstAttemptLivesInItsRow", func(t *testing.T, s journal.Store) {
		exerciseFirstAttempt(t, s, f)
	})
}

// exerciseFirstAttempt: an operation claimed, executed once and completed
// keeps its one attempt in its log row (no attempts-table row, where the
// engine says how to count them), and its trail still answers everything
// (worker, token, times, outcome, request id, note, trace id, the last
// hour's counts); the first statement that starts another attempt (a retry,
// an operator's forced decision, a take-over) writes the first attempt into
// the trail as it ended, or as abandoned, once.
func exerciseFirstAttempt(t *testing.T, s journal.Store, f Features) {
	rowsOf := func(k string, wantRows int, wantInline bool) {
		t.Helper()
		if f.TrailRows == nil {
			return
		}
		rows, inline := f.TrailRows(t, s, k)
		require.Equal(t, wantRows, rows, "attempts-table rows of %s", k)
		require.Equal(t, wantInline, inline, "the row of %s holds its first attempt", k)
	}
	ctx := ctx(t)

	// The common case: one row, the whole trail.
	k := key(t)
	c := claim(t, s, req(k, hashA, owner, time.Minute))
	require.Equal(t, journal.Execute, c.Decision)
	rowsOf(k, 0, true)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	at, traced := s.(journal.AttemptTraces)
	if traced {
		require.NoError(t, at.SetAttemptTrace(ctx, k, c.Token, trace))
	}
	complete(t, s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusSucceeded,
		TargetObjectID: "pay_1", TargetRequestID: "rq-1", Note: "made once"})
	rowsOf(k, 0, true)
	att, err := s.Attempts(ctx, k)
	require.NoError(t, err)
	require.Len(t, att, 1)
	a := att[0]
	require.Equal(t, journal.Attempt{Key: k, Attempt: 1, Token: c.Token, Worker: owner, Kind: journal.KindExecute,
		StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Outcome: journal.OutcomeSucceeded,
		TargetRequestID: "rq-1", Note: "made once"}, a)
	require.False(t, a.StartedAt.IsZero())
	require.False(t, a.FinishedAt.Before(a.StartedAt))
	if traced {
		ids, err := at.AttemptTraceIDs(ctx, k)
		require.NoError(t, err)
		require.Equal(t, map[int64]string{c.Token: trace}, ids)
	}
	b, browse := s.(journal.Browser)
	if browse {
		counts, err := b.AttemptCounts(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Equal(t, []journal.AttemptCount{{Kind: journal.KindExecute, Outcome: journal.OutcomeSucceeded, Count: 1}}, counts)
		later, err := b.AttemptCounts(ctx, a.FinishedAt.Add(time.Second))
		require.NoError(t, err)
		require.Empty(t, later)
	}

	// A retry writes the first attempt into the trail as it ended.
	k = key(t)
	c = claim(t, s, req(k, hashA, owner, time.Minute))
	complete(t, s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusFailedRetryable,
		ErrorCode: "http_503", TargetRequestID: "rq-2"})
	if browse {
		counts, err := b.AttemptCounts(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Contains(t, counts, journal.AttemptCount{Kind: journal.KindExecute, Outcome: journal.OutcomeFailedRetryable, Count: 1},
			"an open row's first attempt is counted once it ended")
	}
	c2 := claim(t, s, req(k, hashA, other, time.Minute))
	require.Equal(t, journal.Execute, c2.Decision)
	require.Equal(t, 2, c2.Attempt)
	rowsOf(k, 2, false)
	att, err = s.Attempts(ctx, k)
	require.NoError(t, err)
	require.Len(t, att, 2)
	require.Equal(t, []any{1, c.Token, owner, journal.OutcomeFailedRetryable, "http_503", "rq-2"},
		[]any{att[0].Attempt, att[0].Token, att[0].Worker, att[0].Outcome, att[0].ErrorCode, att[0].TargetRequestID})
	require.Equal(t, []any{2, c2.Token, other, journal.AttemptOutcome("")},
		[]any{att[1].Attempt, att[1].Token, att[1].Worker, att[1].Outcome})

	// A live execute in the row is seen by an operator's decision; a forced
	// one closes it as abandoned.
	k = key(t)
	claim(t, s, req(k, hashA, owner, time.Hour))
	res := journal.Resolution{Key: k, Status: journal.StatusFailedFinal, ErrorCode: "operator_resolved",
		Evidence: "checked the ledger", Operator: "ops"}
	_, err = s.Resolve(ctx, res)
	require.ErrorIs(t, err, journal.ErrLeaseHeld)
	res.Force = true
	_, err = s.Resolve(ctx, res)
	require.NoError(t, err)
	rowsOf(k, 2, false)
	att, err = s.Attempts(ctx, k)
	require.NoError(t, err)
	require.Len(t, att, 2)
	require.Equal(t, journal.OutcomeAbandoned, att[0].Outcome)
	require.Equal(t, journal.KindOperator, att[1].Kind)

	// An expired lease taken over: abandoned, then fenced when its worker
	// reports what it found.
	k, c = claimed(t, s, 50*time.Millisecond)
	waitExpired(t, s, k)
	require.Equal(t, journal.Reconcile, claim(t, s, req(k, hashA, other, time.Minute)).Decision)
	err = journal.CompleteOne(ctx, s, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_9"})
	require.ErrorIs(t, err, journal.ErrStaleToken)
	att, err = s.Attempts(ctx, k)
	require.NoError(t, err)
	require.Len(t, att, 2)
	require.Equal(t, journal.OutcomeFenced, att[0].Outcome)
	require.Contains(t, att[0].Note, "pay_9")
	require.Equal(t, journal.KindReconcile, att[1].Kind)
}
