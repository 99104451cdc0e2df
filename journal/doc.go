// Package journal is the operation journal's contract: the Store interface,
// the article's state machine (started, succeeded, failed_retryable,
// failed_final, unknown), claim decisions and fencing tokens.
//
// A claim either gives the caller a lease with a fencing token (Execute, or
// Reconcile for an unknown outcome) or tells it what already happened
// (ReplaySucceeded, ReplayFailed, Conflict, InProgress). Completions, lease
// extensions and take-overs succeed only with the current token, so an owner
// whose lease was taken over can no longer write. Lease times come from the
// database clock. Engines live in journal/postgres and journal/sqlite and pass
// one conformance suite, journal/journaltest.
//
// It imports only the standard library.
package journal
