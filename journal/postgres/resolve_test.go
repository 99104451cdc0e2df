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

// TestResolveWaitsOutAClaimAndSeesItsExecute: an operator's unforced
// decision that waits for the row behind a worker's claim (a retryable
// failure taken for a new execute) is refused once the claim commits: it
// sees the execute attempt the claim opened, not only the row, and does not
// overwrite a call that may be in flight.
func TestResolveWaitsOutAClaimAndSeesItsExecute(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := pgtest.Store(t)
	k := journaltest.BenchKeys(1)[0]
	req := journal.ClaimRequest{Key: k, OperationType: "payment.charge", RequestHash: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		TargetSystem: "payments", Owner: "w1", LeaseTTL: time.Hour}
	first, err := s.Claim(ctx, []journal.ClaimRequest{req})
	require.NoError(t, err)
	require.Equal(t, journal.Execute, first[0].Decision)
	require.NoError(t, journal.CompleteOne(ctx, s, journal.Completion{Key: k, Token: first[0].Token,
		Status: journal.StatusFailedRetryable, ErrorCode: "http_503"}))

	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	req.Owner = "w2"
	again, err := s.InTx(tx).Claim(ctx, []journal.ClaimRequest{req})
	require.NoError(t, err)
	require.Equal(t, journal.Execute, again[0].Decision, "the retryable failure is taken for a new execute")
	var xid string
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id()::xid::text`).Scan(&xid))

	type answer struct {
		rec journal.Record
		err error
	}
	resolved := make(chan answer, 1)
	go func() {
		rec, err := s.Resolve(ctx, journal.Resolution{Key: k, Status: journal.StatusFailedFinal, ErrorCode: "operator_resolved",
			Evidence: "nothing in the target", Operator: "bob"})
		resolved <- answer{rec, err}
	}()
	require.Eventually(t, func() bool {
		var waiting int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks
WHERE locktype = 'transactionid' AND transactionid::text = $1 AND NOT granted`, xid).Scan(&waiting)
		return err == nil && waiting > 0
	}, 10*time.Second, 5*time.Millisecond, "the decision waits for the claim's row lock")
	require.NoError(t, tx.Commit(ctx))

	a := <-resolved
	require.ErrorIs(t, a.err, journal.ErrLeaseHeld, "an unforced decision over the claim's live execute")
	rec, err := s.Get(ctx, k)
	require.NoError(t, err)
	require.Equal(t, journal.StatusStarted, rec.Status)
	require.Equal(t, again[0].Token, rec.LeaseToken, "the worker's lease stands")
}
