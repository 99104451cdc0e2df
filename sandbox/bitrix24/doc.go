// Package bitrix24 emulates the Bitrix24 REST API through an incoming
// webhook (docs/targets.md): POST /rest/{user_id}/{code}/{method}[.json] with
// JSON bodies, {"result":…,"time":{…}} answers, list answers with "total",
// errors as {"error":"…","error_description":"…"} (method-level errors with
// an empty "error" and HTTP 400), and the per-portal leaky bucket (503
// QUERY_LIMIT_EXCEEDED).
//
// Methods: crm.deal.add, crm.deal.list, crm.activity.add, crm.activity.list.
// Lists filter with "FIELD"/"=FIELD" (equal) and ">=FIELD"/"<=FIELD" (times
// or numbers); other operators are a 400 here. Lists come 50 per page in ID
// order, with "total" and "next" (the start of the next page, passed back
// as "start"). Deals carry DATE_CREATE, activities CREATED.
// ORIGINATOR_ID/ORIGIN_ID are stored and filterable but, as on a real
// portal [??: no doc claims uniqueness], NOT unique: two adds with one
// ORIGIN_ID make two objects, so races are visible. Every add is a ledger
// effect under the ORIGIN_ID sent. The ignore-key connector fault drops
// ORIGINATOR_ID and ORIGIN_ID from an add (a connector that maps only the
// business fields); titles and texts pass.
//
// Imports: the standard library and sandbox.
package bitrix24
