// Package capacity measures the PostgreSQL journal's growth and its
// retention on this machine: bytes per operation (pg_total_relation_size of
// the journal and its attempts trail), the rate at which operations are
// written, the rate at which the janitor deletes expired ones, and whether
// the tables stay flat when deletes keep up. docs/scaling.md quotes its
// figures and the command that produced them.
//
// The package holds tests only; they import journal, journal/postgres,
// worker (the janitor) and internal/testkit/pgproc. Nothing imports it.
package capacity
