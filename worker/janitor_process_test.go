package worker_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/worker"
)

// TestJanitorPurgesProcessesAtRest: a retention pass deletes the
// processes that came to rest before the retention, as it deletes
// operations; a process still running is kept.
func TestJanitorPurgesProcessesAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	claim := func(key string) journal.ProcessClaim {
		c, err := st.ClaimProcess(ctx, journal.ProcessClaimRequest{Key: key, Name: "order.checkout", RequestHash: "h", Digest: "d",
			Owner: "coord", LeaseTTL: time.Minute})
		require.NoError(t, err)
		return c
	}
	const done, running = "test:process.order.checkout:done:v1", "test:process.order.checkout:running:v1"
	c := claim(done)
	rec, err := st.AdvanceProcess(ctx, journal.ProcessProgress{Key: done, Token: c.Token, Status: journal.ProcessSucceeded, Step: 3})
	require.NoError(t, err)
	claim(running)
	const retention = 5 * time.Millisecond
	for {
		now, err := st.Now(ctx)
		require.NoError(t, err)
		if now.Sub(rec.CompletedAt) > retention {
			break
		}
		time.Sleep(retention)
	}
	j, err := worker.NewJanitor(worker.JanitorConfig{Retention: retention}, st, nil)
	require.NoError(t, err)
	n, err := j.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	_, err = st.GetProcess(ctx, done)
	require.ErrorIs(t, err, journal.ErrNotFound)
	_, err = st.GetProcess(ctx, running)
	require.NoError(t, err)
}
