package journaltest

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/stretchr/testify/require"
)

// exercisePurge checks retention: purge removes terminal rows only.
func exercisePurge(t *testing.T, newStore NewStore, f Features) {
	parallel(t, newStore, "PurgeRemovesTerminalRowsOnly", func(t *testing.T, s journal.Store) {
		byStatus := map[journal.Status]string{}
		for _, st := range []journal.Status{journal.StatusStarted, journal.StatusSucceeded, journal.StatusFailedFinal, journal.StatusFailedRetryable, journal.StatusUnknown} {
			k := key(t)
			byStatus[st] = k
			c := claim(t, s, req(k, hashA, owner, 50*time.Millisecond))
			if st != journal.StatusStarted {
				complete(t, s, completion(k, c.Token, st))
			}
		}
		// An expired started lease is still not purged: its outcome is unknown.
		waitExpired(t, s, byStatus[journal.StatusStarted])
		// Another operation type is kept by a typed purge.
		otherType := key(t)
		r := req(otherType, hashA, owner, time.Minute)
		r.OperationType = "invoice.create"
		c := claim(t, s, r)
		complete(t, s, completion(otherType, c.Token, journal.StatusSucceeded))

		now, err := s.Now(ctx(t))
		require.NoError(t, err)
		n, err := s.Purge(ctx(t), "payment.charge", now.Add(-time.Hour))
		require.NoError(t, err)
		require.Zero(t, n, "nothing completed an hour ago")
		n, err = s.Purge(ctx(t), "payment.charge", now.Add(time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		for st, k := range byStatus {
			_, err := s.Get(ctx(t), k)
			if st.Terminal() {
				require.ErrorIs(t, err, journal.ErrNotFound, st)
				att, err := s.Attempts(ctx(t), k)
				require.NoError(t, err)
				require.Empty(t, att, "attempts leave with their operation")
			} else {
				require.NoError(t, err, "%s must survive purge", st)
			}
		}
		_, err = s.Get(ctx(t), otherType)
		require.NoError(t, err)
		n, err = s.Purge(ctx(t), "", now.Add(time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		// A purged key is a new operation again (the retention horizon's warning, docs/concepts.md).
		require.Equal(t, journal.Execute, claim(t, s, req(byStatus[journal.StatusSucceeded], hashA, owner, time.Minute)).Decision)
	})
}
