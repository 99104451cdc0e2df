package journaltest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

func approvalReq(k, hash string, approvers int, ttl time.Duration) journal.ApprovalRequest {
	return journal.ApprovalRequest{Key: k, OperationType: "payment.charge", RequestHash: hash, TargetSystem: "payments",
		EventID: "evt-" + k, RequestedBy: "agent:orders-bot", Approvers: approvers, TTL: ttl,
		Display: json.RawMessage(`{"operation":"payment.charge","amount_minor":125000,"currency":"RUB","account_id":"merchant-account-17"}`)}
}

func awaiting(t *testing.T, s journal.Store, approvers int, ttl time.Duration) string {
	t.Helper()
	k := key(t)
	g, a, err := s.RequestApproval(ctx(t), approvalReq(k, hashA, approvers, ttl))
	require.NoError(t, err)
	require.Equal(t, journal.GateAwait, g)
	require.Equal(t, journal.ApprovalPending, a.State)
	return k
}

func decide(s journal.Store, t *testing.T, k string, v journal.Vote, who string) (journal.Approval, error) {
	return s.DecideApproval(ctx(t), journal.ApprovalDecision{Key: k, Vote: v, Approver: who, Reason: "checked the order, card 4111 1111 1111 1111"})
}

// exerciseApprovals checks the approval record: an intent waits with no
// log row, copies wait alike, a decision needs distinct approvers other
// than the requester, and every refusal is named; approval lets exactly one
// claim execute, denial and expiry end it failed_final with nothing
// executed.
func exerciseApprovals(t *testing.T, newStore NewStore, _ Features) {
	parallel(t, newStore, "ApprovalAwaitsWithoutAttempt", func(t *testing.T, s journal.Store) {
		k := awaiting(t, s, 1, time.Hour)
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, journal.StatusAwaitingApproval, rec.Status)
		require.Zero(t, rec.AttemptCount)
		require.Zero(t, rec.LeaseToken)
		att, err := s.Attempts(ctx(t), k)
		require.NoError(t, err)
		require.Empty(t, att, "no attempt while awaiting")
		// A copy waits alike; another fingerprint under the key conflicts.
		g, _, err := s.RequestApproval(ctx(t), approvalReq(k, hashA, 1, time.Hour))
		require.NoError(t, err)
		require.Equal(t, journal.GateAwait, g)
		g, a, err := s.RequestApproval(ctx(t), approvalReq(k, hashB, 1, time.Hour))
		require.NoError(t, err)
		require.Equal(t, journal.GateConflict, g)
		require.Equal(t, hashA, a.RequestHash)
		pend, err := s.PendingApprovals(ctx(t), 0)
		require.NoError(t, err)
		require.Contains(t, keysOf(pend), k)
		require.JSONEq(t, `{"operation":"payment.charge","amount_minor":125000,"currency":"RUB","account_id":"merchant-account-17"}`, string(a.Display))
	})
	parallel(t, newStore, "ApprovalFourEyesThenOneExecute", func(t *testing.T, s journal.Store) {
		k := awaiting(t, s, 2, time.Hour)
		_, err := decide(s, t, k, journal.VoteApprove, "agent:orders-bot")
		require.ErrorIs(t, err, journal.ErrSelfApproval)
		_, err = s.DecideApproval(ctx(t), journal.ApprovalDecision{Key: k, Vote: journal.VoteApprove, Approver: "alice", Reason: "ok", RequestHash: hashB})
		require.ErrorIs(t, err, journal.ErrApprovalRefused, "a decision covers the fingerprint shown")
		a, err := decide(s, t, k, journal.VoteApprove, "alice")
		require.NoError(t, err)
		require.Equal(t, journal.ApprovalPending, a.State, "one of two approvers")
		_, err = decide(s, t, k, journal.VoteApprove, "alice")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		require.ErrorContains(t, err, "alice already decided")
		a, err = decide(s, t, k, journal.VoteApprove, "bob")
		require.NoError(t, err)
		require.Equal(t, journal.ApprovalApproved, a.State)
		require.Len(t, a.Votes, 2)
		for _, v := range a.Votes {
			require.Equal(t, hashA, v.RequestHash)
			require.Equal(t, "checked the order, card 4111 11** **** 1111", v.Reason, "reasons are masked")
			require.False(t, v.At.IsZero())
		}
		_, err = decide(s, t, k, journal.VoteApprove, "carol")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		require.ErrorContains(t, err, "already approved")
		_, err = decide(s, t, k, journal.VoteDeny, "carol")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		// Approved: copies proceed, and the claims execute it once.
		g, _, err := s.RequestApproval(ctx(t), approvalReq(k, hashA, 2, time.Hour))
		require.NoError(t, err)
		require.Equal(t, journal.GateProceed, g)
		var (
			mu       sync.Mutex
			executes int
			wg       sync.WaitGroup
		)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := journal.ClaimOne(ctx(t), s, req(k, hashA, owner+string(rune('a'+i)), 30*time.Second))
				if assertNoError(t, err) && c.Decision == journal.Execute {
					mu.Lock()
					executes++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 1, executes)
		g, _, err = s.RequestApproval(ctx(t), approvalReq(k, hashA, 2, time.Hour))
		require.NoError(t, err)
		require.Equal(t, journal.GateProceed, g, "a key with a log row proceeds to its claim")
		rel, err := s.ApprovalsToRelease(ctx(t), 0)
		require.NoError(t, err)
		require.Contains(t, keysOf(rel), k)
		require.NoError(t, s.MarkReleased(ctx(t), k))
		rel, err = s.ApprovalsToRelease(ctx(t), 0)
		require.NoError(t, err)
		require.NotContains(t, keysOf(rel), k)
	})
	parallel(t, newStore, "ApprovalDeniedEndsFinal", func(t *testing.T, s journal.Store) {
		k := awaiting(t, s, 2, time.Hour)
		_, err := decide(s, t, k, journal.VoteApprove, "alice")
		require.NoError(t, err)
		a, err := decide(s, t, k, journal.VoteDeny, "bob")
		require.NoError(t, err)
		require.Equal(t, journal.ApprovalDenied, a.State, "one denial ends it")
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, journal.StatusFailedFinal, rec.Status)
		require.Equal(t, journal.ErrorApprovalDenied, rec.ErrorCode)
		require.Zero(t, rec.AttemptCount)
		_, err = decide(s, t, k, journal.VoteApprove, "carol")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		require.ErrorContains(t, err, "was denied")
		c, err := journal.ClaimOne(ctx(t), s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, err)
		require.Equal(t, journal.ReplayFailed, c.Decision, "nothing executes after a denial")
	})
	parallel(t, newStore, "ApprovalExpires", func(t *testing.T, s journal.Store) {
		k := awaiting(t, s, 1, time.Second)
		a, err := s.Approval(ctx(t), k)
		require.NoError(t, err)
		// Wait on the database clock for the wait limit to pass.
		for {
			now, err := s.Now(ctx(t))
			require.NoError(t, err)
			if now.After(a.ExpiresAt) {
				break
			}
			time.Sleep(a.ExpiresAt.Sub(now) + time.Millisecond)
		}
		keys, err := s.ExpireApprovals(ctx(t), 0)
		require.NoError(t, err)
		require.Contains(t, keys, k)
		keys, err = s.ExpireApprovals(ctx(t), 0)
		require.NoError(t, err)
		require.NotContains(t, keys, k, "expired once")
		rec, err := s.Get(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, journal.StatusFailedFinal, rec.Status)
		require.Equal(t, journal.ErrorApprovalExpired, rec.ErrorCode)
		_, err = decide(s, t, k, journal.VoteApprove, "alice")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		require.ErrorContains(t, err, "expired")
	})
	parallel(t, newStore, "ApprovalRefusedWithoutRequest", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		complete(t, s, completion(k, c.Token, journal.StatusSucceeded))
		_, err := decide(s, t, k, journal.VoteApprove, "alice")
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		require.ErrorContains(t, err, "not awaiting approval: it is succeeded")
		_, err = decide(s, t, key(t), journal.VoteApprove, "alice")
		require.ErrorIs(t, err, journal.ErrNotFound)
		_, err = s.DecideApproval(ctx(t), journal.ApprovalDecision{Key: k, Vote: journal.VoteApprove, Approver: "alice"})
		require.ErrorIs(t, err, journal.ErrInvalid, "a decision needs a reason")
	})
	parallel(t, newStore, "ApprovalConcurrentApprovers", func(t *testing.T, s journal.Store) {
		k := awaiting(t, s, 1, time.Hour)
		var (
			wg sync.WaitGroup
			mu sync.Mutex
			ok int
		)
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := decide(s, t, k, journal.VoteApprove, "approver-"+string(rune('a'+i)))
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				} else if !errors.Is(err, journal.ErrApprovalRefused) {
					t.Errorf("unexpected error: %v", err)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 1, ok, "one approval decides, the rest are refused")
		a, err := s.Approval(ctx(t), k)
		require.NoError(t, err)
		require.Len(t, a.Votes, 1)
	})
}

// exerciseTokenApprovals checks approvals given by pre-signed tokens: a
// token approves its intent at once (the issuer recorded as approver, with
// the jti), copies with it proceed, its jti cannot approve another intent,
// a token for a pending record decides it, a record needing two approvers
// keeps waiting for a person, and the issuer cannot approve what it
// submitted.
func exerciseTokenApprovals(t *testing.T, newStore NewStore, _ Features) {
	tok := func(k, hash, jti string, approvers int) journal.TokenDecision {
		return journal.TokenDecision{Request: approvalReq(k, hash, approvers, time.Hour), Issuer: "shop.example", TokenID: jti}
	}
	parallel(t, newStore, "TokenApprovesAtOnce", func(t *testing.T, s journal.Store) {
		k := key(t)
		g, a, err := s.ApproveByToken(ctx(t), tok(k, hashA, "jti-"+k, 1))
		require.NoError(t, err)
		require.Equal(t, journal.GateProceed, g)
		require.Equal(t, journal.ApprovalApproved, a.State)
		require.Len(t, a.Votes, 1)
		require.Equal(t, "shop.example", a.Votes[0].Approver)
		require.Equal(t, "jti-"+k, a.Votes[0].TokenID)
		require.Equal(t, journal.TokenReason, a.Votes[0].Reason)
		require.Equal(t, hashA, a.Votes[0].RequestHash)
		rel, err := s.ApprovalsToRelease(ctx(t), 0)
		require.NoError(t, err)
		require.NotContains(t, keysOf(rel), k, "nothing parked to hand back: the command at hand carries it out")
		// A copy with the same token proceeds; the claims execute once.
		g, _, err = s.ApproveByToken(ctx(t), tok(k, hashA, "jti-"+k, 1))
		require.NoError(t, err)
		require.Equal(t, journal.GateProceed, g)
		c, err := journal.ClaimOne(ctx(t), s, req(k, hashA, owner, 30*time.Second))
		require.NoError(t, err)
		require.Equal(t, journal.Execute, c.Decision)
		c, err = journal.ClaimOne(ctx(t), s, req(k, hashA, owner+"b", 30*time.Second))
		require.NoError(t, err)
		require.NotEqual(t, journal.Execute, c.Decision)
		// The jti for another intent: refused, nothing recorded for it.
		k2 := key(t)
		_, _, err = s.ApproveByToken(ctx(t), tok(k2, hashA, "jti-"+k, 1))
		require.ErrorIs(t, err, journal.ErrTokenReused)
		require.ErrorIs(t, err, journal.ErrApprovalRefused)
		_, err = s.Approval(ctx(t), k2)
		require.ErrorIs(t, err, journal.ErrNotFound, "a refused token leaves no record")
		// Another fingerprint under the approved key is a conflict.
		k3 := key(t)
		_, _, err = s.ApproveByToken(ctx(t), tok(k3, hashA, "jti-"+k3, 1))
		require.NoError(t, err)
		g, _, err = s.ApproveByToken(ctx(t), tok(k3, hashB, "jti-other-"+k3, 1))
		require.NoError(t, err)
		require.Equal(t, journal.GateConflict, g)
	})
	parallel(t, newStore, "TokenDecidesAWait", func(t *testing.T, s journal.Store) {
		k := awaiting(t, s, 1, time.Hour)
		g, a, err := s.ApproveByToken(ctx(t), tok(k, hashA, "jti-"+k, 1))
		require.NoError(t, err)
		require.Equal(t, journal.GateProceed, g)
		require.Equal(t, journal.ApprovalApproved, a.State)
		_, err = decide(s, t, k, journal.VoteApprove, "alice")
		require.ErrorIs(t, err, journal.ErrApprovalRefused, "already approved by the token")
		// Four eyes: a token is one approver; a person must add the other.
		k2 := awaiting(t, s, 2, time.Hour)
		g, a, err = s.ApproveByToken(ctx(t), tok(k2, hashA, "jti-"+k2, 2))
		require.NoError(t, err)
		require.Equal(t, journal.GateAwait, g)
		require.Equal(t, journal.ApprovalPending, a.State)
		require.Equal(t, 1, a.Approved())
		g, _, err = s.ApproveByToken(ctx(t), tok(k2, hashA, "jti-2-"+k2, 2))
		require.NoError(t, err)
		require.Equal(t, journal.GateAwait, g, "the issuer counts once")
		a, err = decide(s, t, k2, journal.VoteApprove, "alice")
		require.NoError(t, err)
		require.Equal(t, journal.ApprovalApproved, a.State)
		// The issuer cannot approve what it submitted.
		self := tok(key(t), hashA, "jti-self", 1)
		self.Request.RequestedBy = "shop.example"
		_, _, err = s.ApproveByToken(ctx(t), self)
		require.ErrorIs(t, err, journal.ErrSelfApproval)
		// A token after a denial proceeds to the claim, which replays it.
		k3 := awaiting(t, s, 1, time.Hour)
		_, err = decide(s, t, k3, journal.VoteDeny, "alice")
		require.NoError(t, err)
		g, _, err = s.ApproveByToken(ctx(t), tok(k3, hashA, "jti-"+k3, 1))
		require.NoError(t, err)
		require.Equal(t, journal.GateProceed, g)
		c, err := journal.ClaimOne(ctx(t), s, req(k3, hashA, owner, 30*time.Second))
		require.NoError(t, err)
		require.Equal(t, journal.ReplayFailed, c.Decision, "nothing executes after a denial")
	})
	parallel(t, newStore, "TokenConcurrentCopies", func(t *testing.T, s journal.Store) {
		k := key(t)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			proceed int
		)
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, _, err := s.ApproveByToken(ctx(t), tok(k, hashA, "jti-"+k, 1))
				if assertNoError(t, err) && g == journal.GateProceed {
					mu.Lock()
					proceed++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 10, proceed)
		a, err := s.Approval(ctx(t), k)
		require.NoError(t, err)
		require.Len(t, a.Votes, 1, "one vote however many copies")
	})
}

func keysOf(as []journal.Approval) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Key
	}
	return out
}
