package journaltest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exerciseTakeOver checks the reconciler's take-over: stale rows found, shared between concurrent callers.
func exerciseTakeOver(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "TakeOverStale", func(t *testing.T, s journal.Store) {
		kUnknown, kExpired, kLive, kDone := key(t), key(t), key(t), key(t)
		finished(t, s, kUnknown, journal.StatusUnknown)
		ce := claim(t, s, req(kExpired, hashA, owner, 50*time.Millisecond))
		claim(t, s, req(kLive, hashA, owner, time.Hour))
		finished(t, s, kDone, journal.StatusSucceeded)
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
		complete(t, s, journal.Completion{Key: kUnknown, Token: taken[kUnknown].Token, Status: journal.StatusUnknown, Reconciled: true})
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

	parallel(t, newStore, "ConcurrentTakeOverSplitsWork", func(t *testing.T, s journal.Store) {
		const n = 20
		keys := make(map[string]bool, n)
		for range n {
			k := key(t)
			keys[k] = true
			finished(t, s, k, journal.StatusUnknown)
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
}
