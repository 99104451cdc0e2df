package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// TestCompleteRecheck decides a completion batch whose transaction failed
// and may have committed, from what the journal holds afterwards.
func TestCompleteRecheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "journal.db"), Config{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	claim := func(k string) journal.Claim {
		c, err := journal.ClaimOne(ctx, s, journal.ClaimRequest{
			Key: k, OperationType: "payment.charge", RequestHash: "h", TargetSystem: "payments", Owner: "w", LeaseTTL: time.Minute,
		})
		require.NoError(t, err)
		return c
	}
	commitErr := errors.New("disk I/O error")

	applied := claim("test:x:applied:v1")
	require.NoError(t, journal.CompleteOne(ctx, s, journal.Completion{Key: "test:x:applied:v1", Token: applied.Token, Status: journal.StatusSucceeded, TargetObjectID: "o"}))
	open := claim("test:x:open:v1")

	for _, tc := range []struct {
		name    string
		c       journal.Completion
		wantErr error // of the item
		whole   bool  // the whole call fails with the transaction's error
	}{
		{"applied by the failed commit", journal.Completion{Key: "test:x:applied:v1", Token: applied.Token, Status: journal.StatusSucceeded}, nil, false},
		{"not applied: could still apply", journal.Completion{Key: "test:x:open:v1", Token: open.Token, Status: journal.StatusSucceeded}, nil, true},
		{"stale token", journal.Completion{Key: "test:x:open:v1", Token: open.Token + 1, Status: journal.StatusSucceeded}, journal.ErrStaleToken, false},
		{"illegal after terminal", journal.Completion{Key: "test:x:applied:v1", Token: applied.Token, Status: journal.StatusFailedFinal}, journal.ErrIllegalTransition, false},
		{"unknown key", journal.Completion{Key: "test:x:none:v1", Token: 1, Status: journal.StatusSucceeded}, journal.ErrNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, err := s.completeRecheck(ctx, []journal.Completion{tc.c}, commitErr)
			if tc.whole {
				require.ErrorIs(t, err, commitErr)
				return
			}
			require.NoError(t, err)
			if tc.wantErr == nil {
				require.NoError(t, errs[0])
			} else {
				require.ErrorIs(t, errs[0], tc.wantErr)
			}
		})
	}
}
