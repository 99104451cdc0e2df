// Package sqlite is the embedded journal on the pure-Go SQLite driver
// modernc.org/sqlite: the journal used when no database URL is configured, in
// a file in the daemon's data folder.
//
// The database runs in WAL mode with FULL synchronous commits. Every write
// goes through one writer connection in a BEGIN IMMEDIATE transaction, so
// writes are serialised (within a process by the one-connection pool, across
// processes by SQLite's write lock, waited for under a busy timeout) and a
// transaction's reads and writes see one state. Reads that decide nothing
// that can change (Get, Attempts, replays, conflicts) use a pool of read-only
// connections and never wait for the writer.
//
// A claim batch first reads its keys on the reader pool: replays, conflicts
// and live leases are decided there. The rest is decided and written in one
// write transaction (one fsync for the whole batch): a plain read, then an
// insert of new keys and conditional updates that re-claim a retryable
// failure or take over an unknown outcome or an expired lease, each with
// RETURNING. A completion batch is one write transaction too. Batches travel
// as one JSON array parameter read with json_each, so a batch of any size is
// one statement per step.
//
// Lease times come from SQLite's clock, in the statement that decides:
// INTEGER milliseconds since the Unix epoch, CAST(round(unixepoch('subsec') *
// 1000) AS INTEGER). There is no SKIP LOCKED: the single writer serialises
// TakeOverStale callers (journaltest.Features.ConcurrentTakeOver is false).
// What a row means (the claim decision table, the take-over rule, why a
// completion did not apply, whether a resolution applies) is journal's,
// shared with PostgreSQL. Migrations are applied with goose when the store
// opens, or their absence refused, as journal.MigrationPolicy says
// (Config.Migrations). A busy database is the driver's SQLITE_BUSY.
//
// Files follow the concepts, as in journal/postgres: store.go
// (configuration, opening, the write transaction), claim.go, complete.go,
// records.go, resolve.go, purge.go, queries.go (all SQL), batch.go (the JSON
// batch parameter), prepared.go (prepared statements) and migrate.go.
//
// It imports journal, journal/internal/sqljournal (what both engines share
// above their drivers) and migrations of this module, and modernc.org/sqlite
// and goose; never journal/postgres.
package sqlite
