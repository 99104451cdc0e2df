// Package gateway is idemgate's front door for agents that do not speak
// NATS JetStream: "submit a command and await its outcome", and the rules
// that turn an outcome into words a model can act on.
//
// Submit builds the command envelope from (operation, intent_id, payload,
// approval_id), validates it with the daemon's own decoder, publishes it to
// JetStream and waits, up to a bound, for the daemon's result; past the
// bound it answers pending with the operation key. The command's
// Nats-Msg-Id is the operation key plus the request's fingerprint
// (<key>#<fingerprint>): a retried call with the same payload is dropped by
// the stream's duplicate window and answered from the journal or the
// original's result, while a changed payload is a new message that reaches
// the daemon and is answered conflict, never silently swallowed.
//
// Every answer is an Answer built from one outcome record — the daemon's
// result envelope or the journal row — by one set of rules (rules.go), so
// the faces never tell two stories: gateway/mcp (Model Context Protocol
// tools) and gateway/httpapi (HTTP with Idempotency-Key) only translate it.
// next_action tells the agent what it may do next: done, poll,
// retry_same_intent, fix_input, new_intent_required or human_review.
//
// A call still pending can be followed as a task (tasks.go): StartTask
// records it in the IDEMGATE_TASKS key-value bucket of JetStream, Task reads
// its state from the journal row by its key, and CancelTask cancels it while
// no worker has claimed it.
//
// Imports: producer, operation, wire (subjects and headers), redact (the
// faces' bearer token stays a redact.Secret) and journal, read through
// Journal (Get, Attempts, FieldDigests, ListUnresolved, ListIdleRetryable);
// its one write is CancelTask's, through journal.CancelUnclaimed on the
// Claimer it is handed (Deps.Cancels). nats.go for its reply subscription
// and the tasks bucket; never worker, consumer, adapters, ingest or cmd
// (deps_test.go).
package gateway
