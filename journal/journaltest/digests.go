package journaltest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// exerciseFieldDigests: the digests of a key's first request are stored
// with the new row and kept; later requests (a replay, a conflict, a retry
// taken over) never replace them; a key claimed without digests has none.
func exerciseFieldDigests(t *testing.T, s journal.Store) {
	k := key(t)
	first := req(k, hashA, owner, 30*time.Second)
	first.FieldDigests = `{"amount_minor":"9f3c","currency":"01ab"}`
	c := claim(t, s, first)
	require.Equal(t, journal.Execute, c.Decision)
	got, err := s.FieldDigests(ctx(t), k)
	require.NoError(t, err)
	require.Equal(t, first.FieldDigests, got)

	complete(t, s, completion(k, c.Token, journal.StatusSucceeded))
	conflicting := req(k, hashB, other, 30*time.Second)
	conflicting.FieldDigests = `{"amount_minor":"7777","currency":"01ab"}`
	require.Equal(t, journal.Conflict, claim(t, s, conflicting).Decision)
	replay := req(k, hashA, other, 30*time.Second)
	replay.FieldDigests = `{"amount_minor":"0000"}`
	require.Equal(t, journal.ReplaySucceeded, claim(t, s, replay).Decision)
	got, err = s.FieldDigests(ctx(t), k)
	require.NoError(t, err)
	require.Equal(t, first.FieldDigests, got, "the first request's digests stay")

	bare := key(t)
	claim(t, s, req(bare, hashA, owner, 30*time.Second))
	got, err = s.FieldDigests(ctx(t), bare)
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = s.FieldDigests(ctx(t), key(t))
	require.ErrorIs(t, err, journal.ErrNotFound)
}
