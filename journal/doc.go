// Package journal is the operation journal's contract: the Store interface,
// the journal's state machine (started, succeeded, failed_retryable,
// failed_final, unknown), claim decisions and fencing tokens, and the rules
// every engine applies the same way (decide.go, migrate.go).
//
// A claim either gives the caller a lease with a fencing token (Execute, or
// Reconcile for an unknown outcome) or tells it what already happened
// (ReplaySucceeded, ReplayFailed, Conflict, InProgress). DecideExisting is
// that decision table for a row that exists, and TakeOver what a claim that
// takes a claimable row over decides; both engines call them rather than
// restate them. Completions, lease extensions and take-overs succeed only
// with the current token, so an owner whose lease was taken over can no
// longer write; NotApplied explains a completion that did not apply. Lease
// and hold times come from the database clock, and every claim carries that
// clock (Claim.Now): a failed_retryable row held for its backoff answers
// InProgress until the hold ends, so copies and redeliveries take no attempt
// early.
//
// The attempts trail closes every attempt once: with its completion's
// outcome, as fenced when its worker reports after a take-over, or as
// abandoned when its lease is taken over first. Each attempt has a kind
// (AttemptKind: execute, reconcile, operator). An operator's Resolution takes
// the operation over like any owner; Resolution.Applies and ResolveRefused
// are its rule and its refusal; the evidence it leaves in the trail is
// masked (Resolution.TrailNote). MigrationPolicy says what opening a store
// does with migrations the database lacks, on every engine.
//
// Engines live in journal/postgres and journal/sqlite and pass one
// conformance suite, journal/journaltest. It imports only the standard
// library, idemgate's redact, and operation for the key's grammar.
package journal
