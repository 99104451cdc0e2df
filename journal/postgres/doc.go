// Package postgres is the PostgreSQL journal on pgx/v5. A claim first reads
// its batch with a plain SELECT, which takes no lock and writes nothing: a
// batch of replays, conflicts and live leases is decided in that one round
// trip, with no commit to wait for. The keys left go on, in a second round
// trip, to the atomic claim (INSERT … ON CONFLICT DO NOTHING
// RETURNING, then a conditional, row-locking take-over of only the rows whose
// state may change, then a plain read to decide the rest), pipelined as one
// implicit transaction. Completions and heartbeats of a whole batch are one
// statement each. No transaction stays open during a call to a target.
// What a row means (the claim decision table, the take-over rule, why a
// completion did not apply, whether a resolution applies) is journal's,
// shared with SQLite; this package reads and writes the rows.
//
// Files follow the concepts: store.go (configuration, opening), claim.go
// (claims and the reconciler's take-over), complete.go (completions and
// heartbeats), records.go (reads: sqljournal.Reader on this engine's
// statements), search.go (the console's searches), resolve.go (operator
// decisions and review marks), purge.go, queries.go (all SQL) and
// migrate.go. Migrations are
// applied with goose under an advisory lock, as journal.MigrationPolicy says
// (Config.Migrations); SQLSTATEs are pgerrcode's names.
//
// It imports journal, journal/internal/sqljournal (what both engines share
// above their drivers) and migrations of this module, and pgx, pgerrcode and
// goose; never journal/sqlite. Its test helper journal/postgres/pgtest
// imports this package only.
package postgres
