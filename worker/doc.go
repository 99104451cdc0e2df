// Package worker decides: it turns command deliveries into at most one
// effect each: decode → claim the fetch batch in one journal round trip →
// act on each decision (execute, replay, conflict, pending, reconcile) →
// call the adapter under a heartbeated lease → complete with the fencing
// token (group commit) → hand the result back to its consumer.Delivery,
// which publishes it and acks once JetStream acknowledged it. consumer's
// Router fetches and owns acknowledgement; heartbeats keep deliveries alive
// through Delivery.InProgress. The worker, reconciler and janitor are
// internal/startstop services.
//
// One retry schedule (RetryPolicy.NextRetry) drives every wait. A
// retry-class failure is recorded failed_retryable with a hold on the
// database clock — the next attempt's "not before" — so copies and
// redeliveries of the command that arrive earlier wait it out instead of
// taking an attempt; the retry budget (max_attempts calls, max_elapsed from
// the first attempt) belongs to the intent, and waits spend none of it: a
// call's turn in the client-side rate limit (admit.go), a target's refusal
// for its own limit, a lookup's settle time (budget.go). Short waits run
// in-lease (backoff.Retry over the policy), longer ones release the
// command (NakWithDelay). An answer that may come after the target committed
// is never retried before a lookup by key, and an intent whose outcome was
// ever unknown is looked up before it may end failed_final. Rules classify
// error codes, globally and per adapter.
//
// It imports consumer, journal, adapters, operation, wire, redact and
// internal (crashpoint, startstop, telemetry); never nats.go (JetStream is
// consumer's), ingest, producer or cmd.
package worker
