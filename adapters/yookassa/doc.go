// Package yookassa is the adapter for YooKassa API v3 payments and refunds
// (TARGETS.md §5), a plain net/http client.
//
// Guarantees:
//   - native key: every POST carries the operation key as Idempotence-Key;
//     YooKassa replays the first answer for the same key and body for 24
//     hours and refuses the same key with another body (400 invalid_request,
//     parameter Idempotence-Key → never_retry idempotency_key_payload_mismatch).
//     The key limit is 64 characters [3P]: longer keys are sent as their hex
//     SHA-256 (adapters.TargetKey), and the full key always travels in
//     metadata.idemgate_key;
//   - lookup: the list API cannot filter by metadata, so Lookup scans
//     GET /v3/payments (or /v3/refunds?payment_id=…), following next_cursor,
//     over created_at ≥ (when the journal first saw the key − LookupSkew),
//     or ≥ now − LookupWindow when the worker does not say (adapters.Attempt),
//     and matches metadata.idemgate_key; it never re-POSTs (that would create
//     a payment after 24 hours). Each object counts once, by id, however the
//     pages fall. Reaching LookupMaxPages without a match is Indeterminate.
//     Lookups made while a read of the same list runs share the next one
//     (the union of their overlapping windows, n lookups with n ×
//     LookupMaxPages pages), each answered from its own window only, and
//     never from a read that began before the lookup was made;
//   - duplicates: more than one object with the key (the oldest is the
//     operation's) is reported in the outcome (Outcome.Duplicates, the
//     result's "duplicates" and "duplicate_object_ids"), by Lookup and by a
//     retried Execute, which scans after creating (attempt > 1 only: a first
//     attempt has nothing earlier to duplicate);
//   - a canceled payment (declined by the payment network) is a final
//     business failure: never_retry insufficient_funds or declined, and
//     Lookup says Final with the same code;
//   - a connector that drops Idempotence-Key cannot be detected from the
//     answers: two Executes then make two payments (the article's residual
//     window), which Lookup and the retried Execute report; metadata passes
//     such a connector, so Lookup finds the payment it created;
//   - rate: no client-side limit by default (YooKassa publishes none, [??]);
//     RateLimit sets one.
//
// Requests are built with adapters.NewRequest, so net/http never re-sends
// a POST by itself. The approval id is sent as metadata, never as a key.
// Nothing from a response is kept but the id, status, amount and
// cancellation reason.
//
// Imports: adapters, operation, redact (its Secret type) and the standard
// library.
package yookassa
