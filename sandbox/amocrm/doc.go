// Package amocrm emulates the amoCRM (Kommo) API v4 for leads and tasks
// (docs/targets.md): Bearer auth, batch-array POST /api/v4/leads and
// /api/v4/tasks answering {"_embedded":{"leads"|"tasks":[{"id",
// "request_id"}]}} (request_id is echoed, never stored), GET /api/v4/leads?
// query=… (fuzzy full-text over name, custom field values and tags; 204 when
// nothing matches), GET /api/v4/tasks with filter[updated_at][from|to],
// page and limit (204 when empty), validation errors as
// application/problem+json with "validation-errors", 429 above the rate
// limit (7 requests/s by default).
//
// amoCRM has no external-ID field: nothing is unique, a repeated POST makes
// another object. Search freshness is modelled by Options.SearchLag: a lead
// appears in query= results only that long after creation on the emulator
// clock [??: the real lag is unconfirmed]. Each created lead or task is a
// ledger effect under the key the client sent: for leads the value of the
// key custom field (else the tag, else an "[op:<key>]" marker in the name);
// for tasks the "[op:<key>]" marker in the text.
//
// The ignore-key connector fault models a connector that maps only the
// standard fields: a lead loses its custom fields and tags; names and task
// texts pass. Task lists are numbered pages over the newest-first list, as
// on amoCRM (page, limit): tasks created while a client pages shift the
// pages, so a task can come twice.
//
// Imports: the standard library and sandbox.
package amocrm
