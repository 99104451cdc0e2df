package adapters_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
)

func TestKeyLocksSerialisePerKey(t *testing.T) {
	t.Parallel()
	var kl adapters.KeyLocks
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := kl.Lock(context.Background(), "k")
			require.NoError(t, err)
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			inside.Add(-1)
			unlock()
			unlock() // safe twice
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), maxInside.Load())

	// Another key is not blocked; a waiter gives up with its context.
	unlock, err := kl.Lock(context.Background(), "a")
	require.NoError(t, err)
	u2, err := kl.Lock(context.Background(), "b")
	require.NoError(t, err)
	u2()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = kl.Lock(ctx, "a")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	unlock()
	u3, err := kl.Lock(context.Background(), "a")
	require.NoError(t, err)
	u3()
}
