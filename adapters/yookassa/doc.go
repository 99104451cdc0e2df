// Package yookassa is the adapter for YooKassa API v3 payments and refunds
// (docs/targets.md), a plain net/http client.
//
// Guarantees:
//   - native key: every POST carries the operation key as Idempotence-Key;
//     YooKassa replays the first answer for the same key and body for 24
//     hours and refuses the same key with another body (400 invalid_request,
//     parameter Idempotence-Key → never_retry idempotency_key_payload_mismatch).
//     The key limit is 64 characters [3P]: longer keys are sent as their hex
//     SHA-256 (adapters.TargetKey), and the full key always travels in
//     metadata.idemgate_key;
//   - lookup: the list API cannot filter by metadata, so Lookup reads
//     GET /v3/payments (or /v3/refunds?payment_id=…) by created_at and
//     cursor and matches metadata.idemgate_key, each object counted once by
//     id. It never re-POSTs: the reconciler and the console look up by key
//     alone (there is no body to repeat), a lookup must make no payment (an
//     operator's "look up now"; the lookup that decides failed_final once
//     the retries are spent), and after 24 hours a repeat is a new payment.
//     The repeat with the same key is the retry that follows "not found",
//     which YooKassa answers with the first payment if there is one;
//   - a lookup's window is the key's calls: from LookupSkew before the
//     journal first saw the key (adapters.Attempt.Since) to LookupSkew +
//     LookupLate after its last call ended (Attempt.Until; up to the read
//     while a call may still run, and LookupWindow back when the worker
//     says nothing). It does not grow with the time since the calls, so at
//     any sustained rate it holds a bounded number of payments;
//   - one payment per key: where no connector that drops Idempotence-Key
//     is declared (ConnectorDropsKey) and every call for the key fell
//     within KeyLifetime (24 h) of its first sight, YooKassa replayed the
//     first payment to every repeat, so the first match ends a lookup: it
//     starts at the calls' own seconds (coreMargin either side), reads down
//     to the window's start and then up to its end. With the connector
//     declared, or the calls spread wider, the calls' window is read whole
//     (the oldest match is the operation's, the others are duplicates) and
//     the rest only without a match;
//   - rounds: a round reads at most LookupMaxPages pages; without a match
//     by then the answer is Indeterminate (lookup_incomplete), and the
//     replica keeps what the round read without a match (all of it once
//     the window's end is past, else what ends LookupSkew + LookupLate
//     before the read: no payment with the key can join it any more), so
//     the next round reads only the rest. A window of N payments is settled by round
//     ⌈N / (100 × LookupMaxPages)⌉ on a replica (a round its call timeout
//     cuts short keeps what it read too), whatever the shop's rate:
//     at 50 payments a second with the defaults a lost answer is found by
//     the first round and a charge never made is "not found" by the fourth;
//   - lookups made while a read of the same list runs share the next one
//     (the union of their overlapping parts, each charged for the pages
//     that covered its own), each answered from its own window only, and
//     never from a read that began before the lookup was made;
//   - duplicates: more than one object with the key (the oldest is the
//     operation's) is reported in the outcome (Outcome.Duplicates, the
//     result's "duplicates" and "duplicate_object_ids"), by a full Lookup
//     and by a retried Execute, which scans after creating where a key may
//     have made two payments (attempt > 1 only: a first attempt has nothing
//     earlier to duplicate);
//   - a canceled payment (declined by the payment network) is a final
//     business failure: never_retry insufficient_funds or declined, and
//     Lookup says Final with the same code;
//   - a connector that drops Idempotence-Key cannot be detected from the
//     answers: two Executes then make two payments (the documented residual
//     window), which Lookup and the retried Execute report when the
//     connector is declared (connector_drops_key); metadata passes such a
//     connector, so Lookup finds the payment it created either way;
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
