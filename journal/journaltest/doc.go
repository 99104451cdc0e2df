// Package journaltest is the conformance suite every journal.Store must
// pass, a library that each engine's tests call (as River's
// riverdrivertest): Exercise with a store constructor checks every claim
// decision, fencing, leases and holds on the database clock, batches, the
// attempts trail, take-over for reconciliation, operator resolution, reads
// and retention, one file per area (claim.go, batch.go, lease.go, …).
// ExerciseMigrations runs an engine's migrations up, down and up again and
// checks both migration policies; Benchmark is the one benchmark of the
// journal's hot paths that every engine runs.
//
// It imports journal and testify only: never an engine, so that each engine
// is judged by the same code.
package journaltest
