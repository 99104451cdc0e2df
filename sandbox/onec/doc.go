// Package onec emulates a 1C:Enterprise 8.3 infobase published on a web
// server, with both integration paths idemgate uses (docs/targets.md):
//
//   - the integration HTTP service (our contract, not a 1C standard):
//     POST <base>/hs/integration/invoices with Idempotency-Key (≤ 100
//     characters) → 201 {"key","ref","number","posted","replayed":false};
//     the same key and body → 200 with "replayed":true; the same key with
//     another body → 409 {"error":"idempotency_key_reused"}; validation →
//     422 {"error":"validation"}; a lock conflict → 503 {"error":
//     "lock_timeout","retry_after":N}; GET <base>/hs/integration/invoices/{key}
//     → 200 {"key","ref","number","posted","state":"done","found_by"} or 404
//     {"error":"not_found"}. The key is unique per infobase (an information
//     register with the key as its dimension, under a managed lock), and the
//     document Ref is UUIDv5(key) as integrators do. When the register has no
//     record for the key, GET answers with the oldest document whose comment
//     carries the marker "[op:<key>]" ("found_by":"marker", "key":"") — our
//     service's fallback for a request whose header a connector dropped;
//     POST <base>/hs/integration/invoices/{ref}/cancel with Idempotency-Key
//     makes a cancelling document (one effect, kind "invoice_cancel"; the
//     invoice stays, marked cancelled), found again by GET
//     <base>/hs/integration/cancellations/{key} (cancel.go);
//   - the standard OData v3 interface with an extension attribute holding our
//     key (default ВнешнийКлюч): POST <base>/odata/standard.odata/<Document>
//     → 201 entity (no uniqueness: a second POST with the same key makes a
//     second document, as in a real base), GET <Document>?$filter=… with the
//     subset eq, substringof('<text>', <name>) [??: the platform's support is
//     not confirmed], and, with string, guid, bool and number literals,
//     $format=json, $select, $top; errors in the {"odata.error":{…}} shape.
//
// The ignore-key connector fault drops the Idempotency-Key header and the
// key attribute (a connector that maps only the business fields); the
// comment passes.
//
// Both paths use HTTP Basic with an infobase user. Documents created by the
// HTTP service are visible over OData too. Every created document is a ledger
// effect under the key the client sent.
//
// Imports: the standard library, github.com/google/uuid and sandbox.
package onec
