package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The journal's SQL, for the raw pgx baseline of the benchmarks: the store and
// the baseline must send the same statements.
var (
	ClaimFirstSQL    = claimFirst
	ClaimTakeOverSQL = claimTakeOver
	SelectRecordsSQL = selectRecords
	CompleteSQL      = complete
	HeartbeatSQL     = heartbeat
)

// HotPathParams are the hot path pool's settings.
var HotPathParams = hotPathParams

// The scans of the open operations (the reconciler's and the console's
// lease holders), for the test of their plans.
var (
	TakeOverStaleSQL     = takeOverStale
	ListUnresolvedSQL    = readSQL.ListUnresolved
	ListIdleRetryableSQL = readSQL.ListIdleRetryable
	LeaseHoldersSQL      = readSQL.LeaseHolders
)

// InTx returns a copy of s that sends its statements through tx, for tests
// that look inside the transaction a call ran in.
func (s *Store) InTx(tx pgx.Tx) *Store {
	c := *s
	c.db, c.hot = tx, tx
	c.Reader = c.newReader()
	return &c
}

// MigrateDownTo and PendingVersions expose the migration controls that only
// tests use (journaltest.ExerciseMigrations).
func MigrateDownTo(ctx context.Context, pool *pgxpool.Pool, version int64) ([]int64, error) {
	return migrateDownTo(ctx, pool, version)
}

func PendingVersions(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	return pendingVersions(ctx, pool)
}
