package journaltest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exerciseComplete checks completions: the legal transitions and what a refused completion says.
func exerciseComplete(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "CompletionTransitions", func(t *testing.T, s journal.Store) {
		k, c := claimed(t, s, 30*time.Second)
		complete(t, s, completion(k, c.Token, journal.StatusSucceeded))
		// The same completion again (a retry after a commit that seemed to fail) is applied once.
		complete(t, s, completion(k, c.Token, journal.StatusSucceeded))
		// Terminal states do not move.
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusFailedFinal)), journal.ErrIllegalTransition)
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(k, c.Token, journal.StatusUnknown)), journal.ErrIllegalTransition)
		// A failed_retryable operation cannot be completed without a new claim.
		k2 := key(t)
		c2 := finished(t, s, k2, journal.StatusFailedRetryable)
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion(k2, c2.Token, journal.StatusSucceeded)), journal.ErrIllegalTransition)
		// Unknown keys and invalid requests.
		require.ErrorIs(t, journal.CompleteOne(ctx(t), s, completion("test:x:nope:v1", 1, journal.StatusSucceeded)), journal.ErrNotFound)
		_, err := s.Complete(ctx(t), []journal.Completion{{Key: k, Token: c.Token, Status: journal.StatusStarted}})
		require.ErrorIs(t, err, journal.ErrInvalid)
		_, err = s.Complete(ctx(t), []journal.Completion{{Key: k, Token: c.Token, Status: journal.StatusSucceeded, Result: json.RawMessage(`{bad`)}})
		require.ErrorIs(t, err, journal.ErrInvalid)
		_, err = s.Claim(ctx(t), []journal.ClaimRequest{{Key: k}})
		require.ErrorIs(t, err, journal.ErrInvalid)
	})
}
