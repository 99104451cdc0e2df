package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

// A key twice in one Complete batch is applied in order; a key twice in one
// Claim batch is decided once, also when the read alone decides it.
func TestBatchRepeatsAKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := pgtest.Store(t)
	keys := journaltest.BenchKeys(3)
	claims, err := s.Claim(ctx, []journal.ClaimRequest{journaltest.BenchRequest(keys[0]), journaltest.BenchRequest(keys[1]), journaltest.BenchRequest(keys[2])})
	require.NoError(t, err)

	tests := []struct {
		name string
		key  string
		seq  []journal.Status
		want []error
		end  journal.Status
	}{
		{"unknown then succeeded", keys[0], []journal.Status{journal.StatusUnknown, journal.StatusSucceeded}, []error{nil, nil}, journal.StatusSucceeded},
		{"succeeded then unknown", keys[1], []journal.Status{journal.StatusSucceeded, journal.StatusUnknown}, []error{nil, journal.ErrIllegalTransition}, journal.StatusSucceeded},
		{"succeeded twice", keys[2], []journal.Status{journal.StatusSucceeded, journal.StatusSucceeded}, []error{nil, nil}, journal.StatusSucceeded},
	}
	for k, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []journal.Completion
			for _, st := range tt.seq {
				cs = append(cs, journal.Completion{Key: tt.key, Token: claims[k].Token, Status: st, TargetObjectID: "obj"})
			}
			errs, err := s.Complete(ctx, cs)
			require.NoError(t, err)
			for i, want := range tt.want {
				if want == nil {
					require.NoError(t, errs[i], "item %d", i)
				} else {
					require.ErrorIs(t, errs[i], want, "item %d", i)
				}
			}
			rec, err := s.Get(ctx, tt.key)
			require.NoError(t, err)
			require.Equal(t, tt.end, rec.Status)
		})
	}

	// Replays decided by the read alone: every repeat replays.
	got, err := s.Claim(ctx, []journal.ClaimRequest{journaltest.BenchRequest(keys[1]), journaltest.BenchRequest(keys[0]), journaltest.BenchRequest(keys[1])})
	require.NoError(t, err)
	for i, c := range got {
		require.Equal(t, journal.ReplaySucceeded, c.Decision, "item %d", i)
	}
	require.Equal(t, keys[1], got[2].Record.Key)
	// A new key: the first executes, its repeats see it in progress.
	fresh := journaltest.BenchKeys(1)[0]
	got, err = s.Claim(ctx, []journal.ClaimRequest{journaltest.BenchRequest(fresh), journaltest.BenchRequest(keys[0]), journaltest.BenchRequest(fresh)})
	require.NoError(t, err)
	require.Equal(t, journal.Execute, got[0].Decision)
	require.Equal(t, journal.ReplaySucceeded, got[1].Decision)
	require.Equal(t, journal.InProgress, got[2].Decision)
	require.Zero(t, got[2].Token)
	require.Equal(t, fresh, got[2].Record.Key)
}
