// Package adaptertest is the contract suite every adapters.Adapter passes
// against its sandbox emulator. Run(t, h) builds a fresh adapter and emulator
// per case (Harness.New) and proves each guarantee by counting effects in the
// emulator's ledger, not by comparing responses:
//
//   - one Execute = one effect, and Lookup finds it with the same object id;
//   - a replayed Execute with the same key makes no new effect (where the
//     target or the adapter can tell; otherwise the divergence is declared);
//   - a lost response (hang until timeout, close, reset, 500 or truncated
//     body after commit) → reconcile_before_retry, Lookup finds the object,
//     effects stay 1;
//   - a reset before processing → no effect, Lookup not found, then a clean
//     Execute;
//   - 429/503 → retry with Retry-After carried; 502 → reconcile_before_retry;
//   - validation → never_retry validation_error, no effect;
//   - same key, other payload → never_retry idempotency_key_payload_mismatch
//     (or the declared, tested divergence);
//   - Lookup of an unknown key → not_found;
//   - an ignore-key connector → caught, or the residual double-write window
//     of the documented limits, shown by counting effects (and reported
//     by Lookup as a duplicate where declared); either way Lookup finds the
//     object the connector created without our key, by key alone too;
//   - a 500 after the whole request was written → reconcile_before_retry
//     http_500 (a 5xx answered before it was written is retry with a
//     _before_request_written code: adapters' own tests, since a small
//     body is always written before a server can answer);
//   - garbage, wrong status, truncated JSON → a safe-coded *Error, no panic;
//   - concurrent Executes of one key → one effect where declared; where not
//     (ConcurrentDedup false), at most one effect per Execute, only under
//     that key, the lookup finds one of the returned objects and reports
//     more than one as duplicate_objects, and a serialised repeat adds none;
//   - no error text contains the credential.
//
// Imports: adapters, operation, sandbox, testing and testify's require.
// Only tests import this package.
package adaptertest
