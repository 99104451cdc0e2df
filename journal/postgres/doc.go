// Package postgres is the PostgreSQL journal on pgx/v5. A claim first reads
// its batch with a plain SELECT, which takes no lock and writes nothing: a
// batch of replays, conflicts and live leases is decided in that one round
// trip, with no commit to wait for. The keys left go on, in a second round
// trip, to the article's atomic claim (INSERT … ON CONFLICT DO NOTHING
// RETURNING, then a conditional, row-locking take-over of only the rows whose
// state may change, then a plain read to decide the rest), pipelined as one
// implicit transaction. Completions and heartbeats of a whole batch are one
// statement each. No transaction stays open during a call to a target.
// Migrations are applied with goose under an advisory lock.
//
// It imports journal and migrations.
package postgres
