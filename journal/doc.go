// Package journal is the operation journal's contract: the Store interface,
// the article's state machine (started, succeeded, failed_retryable,
// failed_final, unknown), claim decisions and fencing tokens.
//
// A claim either gives the caller a lease with a fencing token (Execute, or
// Reconcile for an unknown outcome) or tells it what already happened
// (ReplaySucceeded, ReplayFailed, Conflict, InProgress). Completions, lease
// extensions and take-overs succeed only with the current token, so an owner
// whose lease was taken over can no longer write. Lease and hold times come
// from the database clock, and every claim carries that clock (Claim.Now): a
// failed_retryable row held for its backoff answers InProgress until the
// hold ends, so copies and redeliveries take no attempt early.
//
// The attempts trail closes every attempt once: with its completion's
// outcome, as fenced when its worker reports after a take-over, or as
// abandoned when its lease is taken over first. An operator's Resolution
// takes the operation over like any owner. Engines live in journal/postgres
// and journal/sqlite and pass one conformance suite, journal/journaltest.
//
// It imports only the standard library.
package journal
