// Package stripe is the sandbox emulator of Stripe's v1 PaymentIntents and
// Refunds API, built on the sandbox framework (docs/targets.md):
//
//   - form-encoded POSTs, JSON answers, a Request-Id header; auth by
//     Authorization: Bearer sk_… or Basic sk_…: (401 otherwise);
//   - Idempotency-Key (≤ 255 characters) on POST: the first answer of a
//     request that began executing is stored for KeyTTL (24h) — successes,
//     402 card errors and the like — and replayed with Idempotent-Replayed:
//     true; another endpoint or other parameters under the same key is 400
//     idempotency_error; a request still in flight under the same key is 409
//     idempotency_error idempotency_key_in_use; validation failures are not
//     stored;
//   - POST /v1/payment_intents (amount, currency, payment_method, confirm,
//     off_session, capture_method, description, metadata[…]), GET
//     /v1/payment_intents/{id}, GET /v1/payment_intents/search with the
//     query metadata['k']:'v' over an eventually consistent index
//     (Options.SearchLag), POST /v1/refunds, GET /v1/refunds?payment_intent=
//     (a strongly consistent list, newest first, starting_after);
//   - test PaymentMethods as Stripe's test mode has them: pm_card_visa,
//     pm_card_mastercard, pm_card_amex succeed; pm_card_chargeDeclined →
//     402 card_error card_declined (generic_decline);
//     pm_card_chargeDeclinedInsufficientFunds → card_declined
//     (insufficient_funds); pm_card_chargeDeclinedExpiredCard →
//     expired_card; pm_card_authenticationRequired → authentication_required
//     off session. Other ids are 400 resource_missing unless listed in
//     Options.PaymentMethods.
//
// Effects: every PaymentIntent confirmed against the card network (kind
// "payment_intent", or "payment_intent_declined") and every refund, under
// the Idempotency-Key sent. With the ignore-key connector fault, or
// Options.IgnoreKeys (a connector that always drops the header, so it can
// be combined with another fault), the key is neither checked nor stored.
//
// Imports: the standard library and sandbox only.
package stripe
