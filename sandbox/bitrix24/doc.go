// Package bitrix24 emulates the Bitrix24 REST API through an incoming
// webhook (TARGETS.md §2): POST /rest/{user_id}/{code}/{method}[.json] with
// JSON bodies, {"result":…,"time":{…}} answers, list answers with "total",
// errors as {"error":"…","error_description":"…"} (method-level errors with
// an empty "error" and HTTP 400), and the per-portal leaky bucket (503
// QUERY_LIMIT_EXCEEDED).
//
// Methods: crm.deal.add, crm.deal.list, crm.activity.add, crm.activity.list.
// ORIGINATOR_ID/ORIGIN_ID are stored and filterable ("=FIELD" and "FIELD"
// keys of filter) but, as on a real portal [??: no doc claims uniqueness],
// NOT unique: two adds with one ORIGIN_ID make two objects, so races are
// visible. Every add is a ledger effect under the ORIGIN_ID sent.
//
// Imports: the standard library and sandbox.
package bitrix24
