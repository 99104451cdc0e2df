// Package yookassa is the sandbox emulator of the YooKassa API v3 (payments
// and refunds), built on the sandbox framework. It keeps YooKassa's
// published contract (docs/targets.md):
//
//   - HTTP Basic auth shopId:secretKey (401 invalid_credentials otherwise);
//   - an Idempotence-Key header on every POST (at most 64 characters, [3P]);
//     the same key with the same body within 24 hours replays the first
//     answer, the same key with another body is 400 invalid_request
//     "Idempotence key duplicated" with parameter "Idempotence-Key";
//   - POST /v3/payments, GET /v3/payments/{id}, GET /v3/payments (created_at
//     window, status, limit ≤ 100, cursor; newest first; next_cursor),
//     POST /v3/refunds, GET /v3/refunds/{id}, GET /v3/refunds (payment_id,
//     created_at window, limit, cursor);
//   - list paging is by cursor, as the real API gives it (an opaque
//     next_cursor, [OK] yookassa.ru/developers/using-api/lists): the cursor
//     marks the last object served, so objects created while a client pages
//     never shift an object onto a later page (no object is served twice);
//   - created_at carries milliseconds, and the list filters compare to
//     the millisecond;
//   - a request is processed whole under one lock: a repeat with the same
//     key that arrives while the first is processed waits for it and gets
//     its answer (YooKassa may answer such a repeat 202/500 with a retry
//     hint instead: the client's next repeat gets the same payment either
//     way). A key is kept KeyTTL (24 h) from the first request that was
//     processed; a later repeat is a new request;
//   - statuses pending, waiting_for_capture (capture:false), succeeded,
//     canceled with cancellation_details {party, reason};
//   - error bodies {"type":"error","id","code","description","parameter"}.
//
// Simplifications, stated: a payment must name a saved method
// (payment_method_id); no confirmation/redirect flows. A saved method listed
// in Options.Declines is declined by the payment network (status canceled
// with that reason); YooKassa's documentation names no test methods, so the
// defaults MethodInsufficientFunds and MethodDeclined are this emulator's own.
// Whether refunds accept metadata is unconfirmed [??]; the emulator accepts it.
//
// History seeds a shop's other traffic (payments spread evenly over a
// time range, each under its own key) for tests of lookups at volume.
//
// Every created payment and refund is recorded in the framework's ledger
// under the Idempotence-Key header the client sent (kinds "payment",
// "payment_canceled", "refund"). With the ignore-key connector fault active
// the key is neither checked nor stored.
//
// Imports: the standard library, github.com/google/uuid and sandbox.
package yookassa
