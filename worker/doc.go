// Package worker turns command deliveries into at most one effect each:
// decode → claim the fetch batch in one journal round trip → act on each
// decision (execute, replay, conflict, pending, reconcile) → call the adapter
// under a heartbeated lease → complete with the fencing token (group commit)
// → publish the result → ack once JetStream acknowledged the result.
// Retry-class failures retry in-lease with backoff as new attempts, longer
// waits release the claim and come back with NakWithDelay; an unknown
// outcome is never retried before a lookup by key.
//
// It imports consumer, journal, adapters and operation.
package worker
