package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

// TestReplayWritesNothing: a claim batch that only replays, conflicts or meets
// live leases is a plain read. It takes no transaction id (so its commit waits
// for no fsync), locks and rewrites no row, adds no attempt and no WAL.
func TestReplayWritesNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := pgtest.Store(t)
	const hashA, hashB = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	req := func(k, hash, owner string) journal.ClaimRequest {
		return journal.ClaimRequest{Key: k, OperationType: "payment.charge", RequestHash: hash, TargetSystem: "payments",
			EventID: "evt-" + k, Owner: owner, LeaseTTL: time.Hour}
	}
	keys := journaltest.BenchKeys(4)
	kDone, kFailed, kLive, kConflict := keys[0], keys[1], keys[2], keys[3]
	first, err := s.Claim(ctx, []journal.ClaimRequest{req(kDone, hashA, "w1"), req(kFailed, hashA, "w1"), req(kLive, hashA, "w1"), req(kConflict, hashA, "w1")})
	require.NoError(t, err)
	errs, err := s.Complete(ctx, []journal.Completion{
		{Key: kDone, Token: first[0].Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_1", Result: json.RawMessage(`{"business_status":"succeeded"}`)},
		{Key: kFailed, Token: first[1].Token, Status: journal.StatusFailedFinal, ErrorCode: "insufficient_funds"},
		{Key: kConflict, Token: first[3].Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_2"},
	})
	require.NoError(t, err)
	require.NoError(t, errors.Join(errs...))

	batch := []journal.ClaimRequest{req(kDone, hashA, "w2"), req(kFailed, hashA, "w2"), req(kLive, hashA, "w2"), req(kConflict, hashB, "w2")}
	want := []journal.Decision{journal.ReplaySucceeded, journal.ReplayFailed, journal.InProgress, journal.Conflict}
	claim := func(s *postgres.Store) {
		t.Helper()
		got, err := s.Claim(ctx, batch)
		require.NoError(t, err)
		for i, w := range want {
			require.Equal(t, w, got[i].Decision, batch[i].Key)
		}
		require.JSONEq(t, `{"business_status":"succeeded"}`, string(got[0].Record.Result))
		require.Equal(t, "insufficient_funds", got[1].Record.ErrorCode)
	}
	// Each row's physical place and its inserting and locking transactions,
	// and the attempts trail: a lock or a rewrite changes them.
	rowState := func() string {
		t.Helper()
		var st string
		require.NoError(t, s.Pool().QueryRow(ctx, `
SELECT string_agg(operation_key || ctid::text || xmin::text || xmax::text, ',' ORDER BY operation_key)
    || (SELECT count(*) FROM agent_operation_attempts WHERE operation_key = ANY($1))::text
FROM agent_operation_log WHERE operation_key = ANY($1)`, keys).Scan(&st))
		return st
	}
	before := rowState()

	t.Run("NoTransactionID", func(t *testing.T) {
		xid := func(batch []journal.ClaimRequest) *string {
			tx, err := s.Pool().Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = s.InTx(tx).Claim(ctx, batch)
			require.NoError(t, err)
			var id *string
			require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&id))
			return id
		}
		// The probe sees a claim that writes...
		require.NotNil(t, xid([]journal.ClaimRequest{req(journaltest.BenchKeys(1)[0], hashA, "w2")}), "a new key is written")
		// ...and a replay batch writes nothing.
		require.Nil(t, xid(batch), "a replay batch took a transaction id: its commit waits for an fsync")
	})

	t.Run("NoWAL", func(t *testing.T) {
		// The server is shared: other sessions move the WAL too. A replay
		// batch that wrote would move it every time, so one quiet window
		// across a batch proves it writes nothing; windows without a batch
		// tell a busy server from a writing replay.
		lsn := func() string {
			var l string
			require.NoError(t, s.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&l))
			return l
		}
		quietIdle := 0
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			l0 := lsn()
			claim(s)
			if lsn() == l0 {
				return
			}
			l0 = lsn()
			_, err := s.Now(ctx)
			require.NoError(t, err)
			if lsn() == l0 {
				quietIdle++
			}
			require.Less(t, quietIdle, 20, "the WAL moved across every replay batch but stood still without one")
		}
		t.Skip("inconclusive: other sessions wrote WAL throughout; NoTransactionID still holds")
	})

	claim(s)
	require.Equal(t, before, rowState(), "a replay batch locked or rewrote a row, or added an attempt")
}
