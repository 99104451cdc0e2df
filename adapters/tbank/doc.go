// Package tbank is the adapter for T-Bank (Tinkoff) internet acquiring API
// v2 (docs/targets.md), a plain net/http client. Every request is signed with
// Token (SHA-256 over the sorted root-level scalar values plus the terminal
// password); the password never leaves the process otherwise.
//
// payment.charge is a merchant-initiated charge of a saved card: account_id
// is the card's RebillId. Execute:
//  1. CheckOrder(OrderId = operation key, or its digest past 36 characters):
//     a payment that moved money is returned as is (replay), a rejected one
//     replays the decline (never_retry), one for another amount is never_retry
//     idempotency_key_payload_mismatch, a NEW one is charged;
//  2. otherwise Init (OrderId, Amount, PayType O, DATA with the approval id;
//     no money moves) and
//  3. Charge(PaymentId, RebillId): CONFIRMED → Outcome; REJECTED with the
//     issuer's code → never_retry insufficient_funds / declined.
//
// Only Charge (and Cancel) can move money, so failures before it are retry;
// a lost Charge answer is reconcile_before_retry. Init refusing the OrderId
// (ErrorCode 8, [3P]) is reconcile_before_retry order_id_in_use.
//
// Guarantees: lookup by key (CheckOrder, strongly consistent); native key
// when OrderIDUnique is configured, otherwise single-flight (the journal
// serialises creation per key, and Execute always looks up before Init). A
// connector that ignored the key still cannot cause a second charge: the
// lookup before Init sees the first. payment.refund uses Cancel with
// ExternalRequestId (a repeat returns the current state [3P]); refunds
// cannot be looked up by key (Lookup: Indeterminate, lookup_unsupported).
//
// No client-side rate limit by default: T-Bank publishes none for the
// acquiring API [??]; RateLimit sets one.
//
// Imports: adapters, operation, redact (its Secret type) and the standard
// library.
package tbank
