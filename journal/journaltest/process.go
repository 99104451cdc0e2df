package journaltest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// processStore is the store's process side; every engine implements it.
func processStore(t *testing.T, s journal.Store) journal.ProcessStore {
	t.Helper()
	ps, ok := s.(journal.ProcessStore)
	require.True(t, ok, "%T does not implement journal.ProcessStore", s)
	return ps
}

func processKey(t *testing.T) string {
	return fmt.Sprintf("test:process.order.checkout:%s-%d:v1", t.Name()[len(t.Name())-min(len(t.Name()), 40):], keySeq.Add(1))
}

func processReq(k, hash, who string, ttl time.Duration) journal.ProcessClaimRequest {
	return journal.ProcessClaimRequest{Key: k, Name: "order.checkout", RequestHash: hash, Digest: "digest-1",
		EventID: "evt-" + k, ApprovalID: "appr-1", Owner: who, LeaseTTL: ttl}
}

func claimProcess(t *testing.T, s journal.ProcessStore, r journal.ProcessClaimRequest) journal.ProcessClaim {
	t.Helper()
	c, err := s.ClaimProcess(ctx(t), r)
	require.NoError(t, err)
	return c
}

func advance(t *testing.T, s journal.ProcessStore, k string, token int64, st journal.ProcessStatus, step int) journal.ProcessRecord {
	t.Helper()
	rec, err := s.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: token, Status: st, Step: step})
	require.NoError(t, err)
	require.Equal(t, st, rec.Status)
	require.Equal(t, step, rec.Step)
	return rec
}

// waitProcessExpired waits until the database clock passes the lease of
// the process k.
func waitProcessExpired(t *testing.T, s journal.Store, ps journal.ProcessStore, k string) {
	t.Helper()
	rec, err := ps.GetProcess(ctx(t), k)
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		if now.After(rec.LeaseUntil) {
			return
		}
		require.True(t, time.Now().Before(deadline), "lease of %s never expired", k)
		time.Sleep(rec.LeaseUntil.Sub(now) + time.Millisecond)
	}
}

// exerciseProcesses checks the process record: its states and their
// transitions, fencing, take-over, release, concurrent starts and the
// definitions kept by digest.
func exerciseProcesses(t *testing.T, newStore NewStore, _ Features) {
	parallel(t, newStore, "ProcessRunsToSuccessAndReplays", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		k := processKey(t)
		c := claimProcess(t, ps, processReq(k, hashA, owner, 30*time.Second))
		require.Equal(t, journal.ProcessRun, c.Decision)
		require.False(t, c.Resumed)
		require.Equal(t, int64(1), c.Token)
		require.Equal(t, journal.ProcessRunning, c.Record.Status)
		require.Equal(t, 0, c.Record.Step)
		require.Equal(t, "digest-1", c.Record.Digest)
		require.Equal(t, owner, c.Record.LeaseOwner)
		require.True(t, c.Record.LeaseUntil.After(c.Now))

		// A copy under a live lease waits; it takes nothing over.
		busy := claimProcess(t, ps, processReq(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.ProcessBusy, busy.Decision)
		require.Zero(t, busy.Token)

		advance(t, ps, k, c.Token, journal.ProcessRunning, 1)
		// The same progress again (a commit that seemed to fail) is no error.
		advance(t, ps, k, c.Token, journal.ProcessRunning, 1)
		_, err := ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessRunning, Step: 0})
		require.ErrorIs(t, err, journal.ErrIllegalTransition, "steps only go forward")
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token + 1, Status: journal.ProcessRunning, Step: 2})
		require.ErrorIs(t, err, journal.ErrStaleToken)
		require.NoError(t, ps.HeartbeatProcess(ctx(t), k, c.Token, time.Minute))

		done := advance(t, ps, k, c.Token, journal.ProcessSucceeded, 3)
		require.False(t, done.CompletedAt.IsZero())
		require.True(t, done.LeaseUntil.IsZero(), "a process at rest holds no lease")
		require.ErrorIs(t, ps.HeartbeatProcess(ctx(t), k, c.Token, time.Minute), journal.ErrIllegalTransition)
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensating, Step: 1})
		require.ErrorIs(t, err, journal.ErrIllegalTransition, "a succeeded process stays succeeded")

		replay := claimProcess(t, ps, processReq(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.ProcessReplay, replay.Decision)
		require.Equal(t, journal.ProcessSucceeded, replay.Record.Status)
		conflict := claimProcess(t, ps, processReq(k, hashB, other, 30*time.Second))
		require.Equal(t, journal.ProcessConflict, conflict.Decision)
		require.Equal(t, hashA, conflict.Record.RequestHash)

		got, err := ps.GetProcess(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, done.Status, got.Status)
		require.Equal(t, "evt-"+k, got.EventID)
		_, err = ps.GetProcess(ctx(t), "test:process.order.checkout:missing:v1")
		require.ErrorIs(t, err, journal.ErrNotFound)
	})

	parallel(t, newStore, "ProcessCompensatesNewestFirst", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		k := processKey(t)
		c := claimProcess(t, ps, processReq(k, hashA, owner, 30*time.Second))
		advance(t, ps, k, c.Token, journal.ProcessRunning, 2)
		rec, err := ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensating,
			Step: 1, FailedStep: "shipping", ErrorCode: "validation_error"})
		require.NoError(t, err)
		require.Equal(t, "shipping", rec.FailedStep)
		require.Equal(t, "validation_error", rec.ErrorCode)
		require.True(t, rec.CompletedAt.IsZero(), "compensating is not at rest")
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensating,
			Step: 2, FailedStep: "shipping", ErrorCode: "validation_error"})
		require.ErrorIs(t, err, journal.ErrIllegalTransition, "compensations run newest first")
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessRunning, Step: 2})
		require.ErrorIs(t, err, journal.ErrIllegalTransition, "a compensating process never runs forward again")
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensated,
			Step: 0, FailedStep: "shipping", ErrorCode: "validation_error"})
		require.ErrorIs(t, err, journal.ErrIllegalTransition, "compensated means every compensation ran (step -1)")
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensating,
			Step: 0, FailedStep: "shipping", ErrorCode: "validation_error"})
		require.NoError(t, err)
		rec, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensated,
			Step: -1, FailedStep: "shipping", ErrorCode: "validation_error"})
		require.NoError(t, err)
		require.Equal(t, journal.ProcessCompensated, rec.Status)
		require.False(t, rec.CompletedAt.IsZero())

		// A first step that fails leaves nothing to compensate.
		k2 := processKey(t)
		c2 := claimProcess(t, ps, processReq(k2, hashA, owner, 30*time.Second))
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k2, Token: c2.Token, Status: journal.ProcessCompensated,
			Step: -1, FailedStep: "invoice", ErrorCode: "validation_error"})
		require.NoError(t, err)
	})

	parallel(t, newStore, "ProcessNeedsReviewIsListed", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		k := processKey(t)
		c := claimProcess(t, ps, processReq(k, hashA, owner, 30*time.Second))
		advance(t, ps, k, c.Token, journal.ProcessRunning, 1)
		_, err := ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensating, Step: 0,
			FailedStep: "charge", ErrorCode: "declined"})
		require.NoError(t, err)
		rec, err := ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessNeedsReview, Step: 0,
			FailedStep: "invoice", ErrorCode: "already_cancelled"})
		require.NoError(t, err)
		require.False(t, rec.CompletedAt.IsZero())
		running := processKey(t)
		claimProcess(t, ps, processReq(running, hashA, owner, 30*time.Second))

		list, err := ps.ListProcesses(ctx(t), []journal.ProcessStatus{journal.ProcessNeedsReview}, 100)
		require.NoError(t, err)
		require.Contains(t, processKeys(list), k)
		require.NotContains(t, processKeys(list), running)
		open, err := ps.ListProcesses(ctx(t), []journal.ProcessStatus{journal.ProcessRunning, journal.ProcessCompensating}, 100)
		require.NoError(t, err)
		require.Contains(t, processKeys(open), running)
		require.NotContains(t, processKeys(open), k)
		replay := claimProcess(t, ps, processReq(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.ProcessReplay, replay.Decision, "needs_review waits for a person, not for a coordinator")
	})

	parallel(t, newStore, "ProcessResolvedByAnOperator", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		k := processKey(t)
		c := claimProcess(t, ps, processReq(k, hashA, owner, 30*time.Second))
		res := journal.ProcessResolution{Key: k, Status: journal.ProcessCompensated, Operator: "alice",
			Evidence: "invoice 0042 cancelled by hand in 1C on 2026-12-05"}
		_, err := ps.ResolveProcess(ctx(t), res)
		require.ErrorIs(t, err, journal.ErrIllegalTransition, "a running process has a coordinator: no person settles it")
		_, err = ps.ResolveProcess(ctx(t), journal.ProcessResolution{Key: processKey(t), Status: journal.ProcessCompensated,
			Operator: "alice", Evidence: "x"})
		require.ErrorIs(t, err, journal.ErrNotFound)
		for _, bad := range []journal.ProcessResolution{
			{Key: k, Status: journal.ProcessRunning, Operator: "alice", Evidence: "x"},
			{Key: k, Status: journal.ProcessNeedsReview, Operator: "alice", Evidence: "x"},
			{Key: k, Status: journal.ProcessSucceeded, Operator: "alice"},
			{Key: k, Status: journal.ProcessSucceeded, Evidence: "x"},
			{Key: k, Status: journal.ProcessSucceeded, Operator: "alice", Evidence: strings.Repeat("e", journal.MaxEvidenceLen+1)},
		} {
			_, err := ps.ResolveProcess(ctx(t), bad)
			require.ErrorIs(t, err, journal.ErrInvalid, "%+v", bad)
		}

		advance(t, ps, k, c.Token, journal.ProcessRunning, 1)
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensating, Step: 0,
			FailedStep: "charge", ErrorCode: "declined"})
		require.NoError(t, err)
		review, err := ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessNeedsReview, Step: 0,
			FailedStep: "invoice", ErrorCode: "already_cancelled"})
		require.NoError(t, err)
		require.False(t, review.Resolved())

		rec, err := ps.ResolveProcess(ctx(t), res)
		require.NoError(t, err)
		require.Equal(t, journal.ProcessCompensated, rec.Status)
		require.True(t, rec.Resolved())
		require.Equal(t, "alice", rec.ResolvedBy)
		require.Equal(t, res.Evidence, rec.ResolutionEvidence)
		require.False(t, rec.ResolvedAt.IsZero())
		require.False(t, rec.CompletedAt.Before(review.CompletedAt), "retention counts from the settlement")
		require.Equal(t, "invoice", rec.FailedStep, "what stopped the process stays on record")
		require.Equal(t, "already_cancelled", rec.ErrorCode)
		require.Greater(t, rec.LeaseToken, c.Token, "the settlement fences any coordinator")
		require.Equal(t, c.Record.LeaseOwner, rec.LeaseOwner, "the last coordinator stays named")
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: c.Token, Status: journal.ProcessCompensated, Step: -1})
		require.ErrorIs(t, err, journal.ErrStaleToken)

		again, err := ps.ResolveProcess(ctx(t), res)
		require.NoError(t, err, "the same settlement twice is not an error")
		require.Equal(t, rec.LeaseToken, again.LeaseToken, "and changes nothing")
		_, err = ps.ResolveProcess(ctx(t), journal.ProcessResolution{Key: k, Status: journal.ProcessSucceeded, Operator: "bob", Evidence: "y"})
		require.ErrorIs(t, err, journal.ErrIllegalTransition, "a settled process is not settled again otherwise")

		got, err := ps.GetProcess(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, rec.ResolvedAt, got.ResolvedAt)
		list, err := ps.ListProcesses(ctx(t), []journal.ProcessStatus{journal.ProcessNeedsReview}, 1000)
		require.NoError(t, err)
		require.NotContains(t, processKeys(list), k, "no longer listed for review")

		// The evidence is kept masked, as every note of the journal.
		k2 := processKey(t)
		c2 := claimProcess(t, ps, processReq(k2, hashA, owner, 30*time.Second))
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k2, Token: c2.Token, Status: journal.ProcessNeedsReview, Step: 0,
			FailedStep: "invoice", ErrorCode: "x"})
		require.NoError(t, err)
		masked, err := ps.ResolveProcess(ctx(t), journal.ProcessResolution{Key: k2, Status: journal.ProcessSucceeded, Operator: "alice",
			Evidence: "refunded card 4111111111111111 by hand"})
		require.NoError(t, err)
		require.NotContains(t, masked.ResolutionEvidence, "4111111111111111")
		require.Contains(t, masked.ResolutionEvidence, "refunded card 411111")
		replay := claimProcess(t, ps, processReq(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.ProcessReplay, replay.Decision)
		require.True(t, replay.Record.Resolved())
	})

	parallel(t, newStore, "ProcessTakeOverFencesTheOldCoordinator", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		k := processKey(t)
		first := claimProcess(t, ps, processReq(k, hashA, owner, 50*time.Millisecond))
		advance(t, ps, k, first.Token, journal.ProcessRunning, 1)
		waitProcessExpired(t, s, ps, k)
		second := claimProcess(t, ps, processReq(k, hashA, other, 30*time.Second))
		require.Equal(t, journal.ProcessRun, second.Decision)
		require.True(t, second.Resumed)
		require.Greater(t, second.Token, first.Token)
		require.Equal(t, 1, second.Record.Step, "the new coordinator resumes where the process stands")
		require.Equal(t, other, second.Record.LeaseOwner)
		_, err := ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: k, Token: first.Token, Status: journal.ProcessRunning, Step: 2})
		require.ErrorIs(t, err, journal.ErrStaleToken)
		require.ErrorIs(t, ps.HeartbeatProcess(ctx(t), k, first.Token, time.Minute), journal.ErrStaleToken)
		require.ErrorIs(t, ps.ReleaseProcess(ctx(t), k, first.Token), journal.ErrStaleToken)
		advance(t, ps, k, second.Token, journal.ProcessRunning, 2)
	})

	parallel(t, newStore, "ProcessReleaseHandsOverAtOnce", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		k := processKey(t)
		first := claimProcess(t, ps, processReq(k, hashA, owner, time.Hour))
		require.NoError(t, ps.ReleaseProcess(ctx(t), k, first.Token))
		second := claimProcess(t, ps, processReq(k, hashA, other, time.Hour))
		require.Equal(t, journal.ProcessRun, second.Decision)
		require.True(t, second.Resumed)
		require.Equal(t, first.Token+1, second.Token)
		require.ErrorIs(t, ps.ReleaseProcess(ctx(t), "test:process.x:missing:v1", 1), journal.ErrNotFound)
	})

	parallel(t, newStore, "ProcessConcurrentStartsRunOnce", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		k := processKey(t)
		const n = 10
		claims := make([]journal.ProcessClaim, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range claims {
			wg.Go(func() {
				<-start
				c, err := ps.ClaimProcess(context.Background(), processReq(k, hashA, fmt.Sprintf("w%d", i), 30*time.Second))
				if assertNoError(t, err) {
					claims[i] = c
				}
			})
		}
		close(start)
		wg.Wait()
		runs := 0
		for _, c := range claims {
			switch c.Decision {
			case journal.ProcessRun:
				runs++
			case journal.ProcessBusy:
			default:
				t.Errorf("unexpected decision %s", c.Decision)
			}
		}
		require.Equal(t, 1, runs, "one coordinator per process")
	})

	parallel(t, newStore, "ProcessDefinitionsKeptByDigest", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		digest := fmt.Sprintf("digest-%d", keySeq.Add(1))
		d := journal.ProcessDefinition{Digest: digest, Name: "order.checkout", Body: []byte(`{"name":"order.checkout","decl":{}}`)}
		require.NoError(t, ps.SaveDefinition(ctx(t), d))
		again := d
		again.Body = []byte(`{"changed":true}`)
		require.NoError(t, ps.SaveDefinition(ctx(t), again), "saving a kept digest again is no error")
		got, err := ps.Definition(ctx(t), digest)
		require.NoError(t, err)
		require.Equal(t, d.Body, got.Body, "a kept definition never changes")
		require.Equal(t, "order.checkout", got.Name)
		require.False(t, got.CreatedAt.IsZero())
		_, err = ps.Definition(ctx(t), "missing")
		require.ErrorIs(t, err, journal.ErrNotFound)
		require.ErrorIs(t, ps.SaveDefinition(ctx(t), journal.ProcessDefinition{Digest: "x"}), journal.ErrInvalid)
	})

	parallel(t, newStore, "ProcessPurgeKeepsWhatIsNotAtRest", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		done := processKey(t)
		c := claimProcess(t, ps, processReq(done, hashA, owner, 30*time.Second))
		advance(t, ps, done, c.Token, journal.ProcessSucceeded, 1)
		undone := processKey(t)
		c = claimProcess(t, ps, processReq(undone, hashA, owner, 30*time.Second))
		_, err := ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: undone, Token: c.Token, Status: journal.ProcessCompensated, Step: -1, FailedStep: "invoice", ErrorCode: "x"})
		require.NoError(t, err)
		review := processKey(t)
		c = claimProcess(t, ps, processReq(review, hashA, owner, 30*time.Second))
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: review, Token: c.Token, Status: journal.ProcessNeedsReview, Step: 0, FailedStep: "invoice", ErrorCode: "x"})
		require.NoError(t, err)
		running := processKey(t)
		claimProcess(t, ps, processReq(running, hashA, owner, 30*time.Second))

		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		n, err := ps.PurgeProcesses(ctx(t), now.Add(-time.Hour))
		require.NoError(t, err)
		require.Zero(t, n, "nothing came to rest an hour ago")
		_, err = ps.PurgeProcesses(ctx(t), now.Add(time.Second))
		require.NoError(t, err)
		for _, k := range []string{done, undone} {
			_, err := ps.GetProcess(ctx(t), k)
			require.ErrorIs(t, err, journal.ErrNotFound, k)
		}
		for _, k := range []string{review, running} {
			_, err := ps.GetProcess(ctx(t), k)
			require.NoError(t, err, "%s is kept: a person or a coordinator still needs it", k)
		}
	})

	parallel(t, newStore, "ProcessClaimValidates", func(t *testing.T, s journal.Store) {
		ps := processStore(t, s)
		_, err := ps.ClaimProcess(ctx(t), journal.ProcessClaimRequest{Key: processKey(t), Owner: owner, LeaseTTL: time.Second})
		require.ErrorIs(t, err, journal.ErrInvalid)
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: "k", Token: 1, Status: "halfway"})
		require.ErrorIs(t, err, journal.ErrInvalid)
		_, err = ps.AdvanceProcess(ctx(t), journal.ProcessProgress{Key: "test:process.x:missing:v1", Token: 1, Status: journal.ProcessRunning, Step: 1})
		require.ErrorIs(t, err, journal.ErrNotFound)
	})
}

func processKeys(recs []journal.ProcessRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}
