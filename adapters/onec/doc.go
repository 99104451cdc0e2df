// Package onec is the idemgate adapter for 1C:Enterprise 8.3 (target system
// "1c"). It performs invoice.create in one of two configurable modes:
//
//   - ModeHTTPService (default): POST
//     <base>/hs/integration/invoices with the operation key in
//     Idempotency-Key; the integration HTTP service on the 1C side keeps the
//     key unique in an information register under a managed lock, answers a
//     replay with the original invoice and a key reused with another payload
//     with 409. Lookup is GET <base>/hs/integration/invoices/{key}. This is
//     NativeKey: a replay makes no second document.
//   - ModeOData, for bases that only expose the standard OData interface:
//     the key goes into an extension attribute (default ВнешнийКлюч) of the
//     document. OData enforces no uniqueness, so Execute is single-flight per
//     key in this process (adapters.KeyLocks): search by the attribute, verify
//     a found document against the payload, create only when none exists,
//     then search again. Lookup is the same $filter search. When several
//     documents hold the key the oldest is the operation's and the others are
//     reported (Outcome.Duplicates; the worker logs and counts them).
//     Across replicas single-flight does not hold; the journal lease does.
//     The document is created unposted (business status "created"); posting
//     stays with 1C's own routines.
//
// invoice.cancel, the compensation of invoice.create, is served in
// ModeHTTPService only (Supports; the daemon refuses an odata route for it
// at start): POST <base>/hs/integration/invoices/{ref}/cancel with the key
// in Idempotency-Key makes a cancelling document of its own — the invoice
// stays, marked cancelled, never deleted — and Lookup is GET
// <base>/hs/integration/cancellations/{key}. An invoice cancelled earlier
// under another key is never_retry already_cancelled.
//
// Classification (docs/targets.md): connection refused before sending → retry;
// timeout or connection lost after sending, 500 (1C's "-1" cannot tell a
// failing handler from a transient one) and 502/504 from the web server in
// front of 1C → reconcile_before_retry (the 1C process may have committed
// before the proxy gave up: the safe side of an unconfirmed point); 503 lock
// conflict and 429 → retry with Retry-After (header or the body's
// retry_after); 400/422 → never_retry validation_error; 401/403 → never_retry
// authorization_denied; 409 → never_retry idempotency_key_payload_mismatch.
// Any other status or an unreadable body is unexpected_response, never a
// success. Responses are reduced to an Outcome (Ref as object id, number,
// posted); bodies are never logged or kept, and the password never appears in
// an error.
//
// In both modes the key also ends the document's comment (Комментарий) as
// the marker "[op:<key>]": a second carrier for connectors that map only
// business fields. Behind a connector that drops the key attribute, OData
// finds the document by substringof on the comment [??: the platform's
// support is unconfirmed] (Lookup always, Execute unless the worker says
// this is the key's first attempt), so a retry returns it. Behind one that
// drops Idempotency-Key, the service stores the invoice without our key:
// the adapter notices the missing key echo and logs it, and the service's
// lookup (our contract) finds the invoice by the marker, but a replay makes
// a second invoice — the residual double-write window of the documented
// limitations, which only the journal narrows.
//
// Imports: adapters, operation, redact (its Secret type) and the standard
// library.
package onec
