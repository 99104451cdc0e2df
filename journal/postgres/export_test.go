package postgres

import "github.com/jackc/pgx/v5"

// The journal's SQL, for the raw pgx baseline of the benchmarks: the store and
// the baseline must send the same statements.
const (
	ClaimInsertSQL   = claimInsert
	ClaimTakeOverSQL = claimTakeOver
	SelectRecordsSQL = selectRecords
	CompleteSQL      = complete
)

// InTx returns a copy of s that sends its statements through tx, for tests
// that look inside the transaction a call ran in.
func (s *Store) InTx(tx pgx.Tx) *Store {
	c := *s
	c.db = tx
	return &c
}
