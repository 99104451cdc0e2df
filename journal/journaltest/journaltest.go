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
	// TrailRows counts the rows of the attempts table for key and says
	// whether its log row holds its first attempt; nil skips those checks.
	TrailRows func(t *testing.T, s journal.Store, key string) (rows int, inline bool)
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

// parallel runs fn as the parallel case name on a fresh store from
// newStore: the set-up every case of the suite starts from.
func parallel(t *testing.T, newStore NewStore, name string, fn func(t *testing.T, s journal.Store)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		fn(t, newStore(t))
	})
}

// claimed claims a fresh key for owner (hashA, a lease of ttl) and returns
// the key and its claim.
func claimed(t *testing.T, s journal.Store, ttl time.Duration) (string, journal.Claim) {
	t.Helper()
	k := key(t)
	return k, claim(t, s, req(k, hashA, owner, ttl))
}

// finished claims k for owner (hashA, a 30s lease) and completes it as st
// (completion), returning the claim.
func finished(t *testing.T, s journal.Store, k string, st journal.Status) journal.Claim {
	t.Helper()
	c := claim(t, s, req(k, hashA, owner, 30*time.Second))
	complete(t, s, completion(k, c.Token, st))
	return c
}

// complete completes c, which must apply.
func complete(t *testing.T, s journal.Store, c journal.Completion) {
	t.Helper()
	require.NoError(t, journal.CompleteOne(ctx(t), s, c))
}

// claimAtOnce has n workers (w0…) claim k at the same moment with hashA,
// and returns their claims by worker.
func claimAtOnce(t *testing.T, s journal.Store, k string, n int) []journal.Claim {
	t.Helper()
	results := make([]journal.Claim, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			<-start
			got, err := journal.ClaimOne(context.Background(), s, req(k, hashA, fmt.Sprintf("w%d", i), 30*time.Second))
			if assertNoError(t, err) {
				results[i] = got
			}
		})
	}
	close(start)
	wg.Wait()
	return results
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
	exerciseClaim(t, newStore, f)
	exerciseBatch(t, newStore, f)
	exerciseLease(t, newStore, f)
	exerciseComplete(t, newStore, f)
	exerciseTrail(t, newStore, f)
	exerciseTakeOver(t, newStore, f)
	exerciseResolve(t, newStore, f)
	exerciseReads(t, newStore, f)
	exercisePurge(t, newStore, f)
	exerciseProcesses(t, newStore, f)
	exerciseCancel(t, newStore, f)
	exerciseApprovals(t, newStore, f)
	exerciseTokenApprovals(t, newStore, f)
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
