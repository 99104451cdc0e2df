// Package stripe is the adapter for Stripe's v1 PaymentIntents and Refunds
// (docs/targets.md), a plain net/http client (form-encoded requests).
//
// payment.charge creates and confirms a PaymentIntent off-session with the
// saved PaymentMethod account_id; payment.refund creates a Refund of the
// PaymentIntent payment_id. Guarantees:
//   - native key: the operation key is the Idempotency-Key (≤ 255, so never
//     digested). Stripe replays the first answer for 24 hours
//     (Idempotent-Replayed: true) and refuses other parameters under the
//     key (400 idempotency_error → never_retry
//     idempotency_key_payload_mismatch); a concurrent request with the key
//     is 409 → retry;
//   - lookup: charges by the Search API, metadata['idemgate_key']:'<key>',
//     which is eventually consistent: Capabilities.SettleTime (default 1m)
//     is how long a "not found" must wait; refunds by the PaymentIntent's
//     refund list (strongly consistent). Lookup never replays a POST;
//   - classes: card_error → never_retry insufficient_funds / declined (the
//     declined PaymentIntent is a final business failure for Lookup too);
//     429 (rate_limit, lock_timeout) → retry with Retry-After; 500 (Stripe
//     caches it and replays it for the key) → reconcile_before_retry;
//     503 → retry unless Stripe-Should-Retry: false; 502, 504 → reconcile
//     unless Stripe-Should-Retry: true;
//     400/404 → validation / not_found; 401/403 → authorization_denied;
//   - net/http would re-send a POST carrying Idempotency-Key by itself when a
//     reused connection closes before any answer; requests are built with
//     adapters.NewRequest (GetBody nil), so it does not, and the worker
//     decides (TestTransportDoesNotResend counts the effects);
//   - a connector that drops the header cannot be detected from the answer:
//     two Executes make two PaymentIntents; metadata passes such a connector,
//     so Lookup finds them and reports the second (duplicate_objects,
//     Outcome.Duplicates; the oldest stays the operation's);
//   - rate: requests take a slot of a client-side bucket first (RateLimit;
//     default 25/s for a test-mode key, 100/s otherwise, Stripe's published
//     limits, [OK]).
//
// The approval id travels as metadata, never as a key. Nothing from an
// answer is kept but ids, status, amount, currency and decline code.
//
// Imports: adapters, operation, redact (its Secret type) and the standard
// library.
package stripe
