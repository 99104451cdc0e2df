// Package amocrm is the idemgate adapter for amoCRM / Kommo API v4 (target
// system "crm"): crm.deal.create → a lead (POST /api/v4/leads),
// crm.task.create → a task (POST /api/v4/tasks).
//
// amoCRM has no external-ID support and request_id is only echoed, never
// stored (TARGETS.md §3). So our key is written into the object and searched
// before every create, and every object found is verified exactly, because
// the search is fuzzy:
//
//   - leads: the key goes into a text custom field (KeyFieldID) and a tag;
//     the search is GET /api/v4/leads?query=<key>, and a lead counts only when
//     the field's value (or, without a field, a tag) equals the key;
//   - tasks (no custom fields, no tags): the text ends with the marker
//     "[op:<key>]"; the search scans GET /api/v4/tasks by
//     filter[updated_at] over LookupWindow, at most LookupMaxPages pages.
//     When the scan stops at the page cap without a match the answer is
//     Indeterminate, never "not found".
//
// Creation is single-flight per key in this process (adapters.KeyLocks);
// across replicas the journal lease is what serialises a key. The query
// search lags behind writes [??: the lag is unconfirmed]: SettleTime (default
// 30s) is declared in Capabilities, so the worker trusts a "not found" only
// that long after the attempt — inside that window a search before create can
// miss a lead created by a lost-response attempt, which is why the worker
// must reconcile (and wait SettleTime) before any re-execute. Behind a
// connector that drops the field, tag or marker, a replay creates a second
// object: the article's residual double-write window.
//
// amoCRM prices are whole currency units in the account's currency:
// amount_minor must be a multiple of 100 (else validation_error) and the
// currency is not sent.
//
// Classification: 429 → retry (Retry-After when sent [??]); 5xx and
// timeouts after sending → reconcile_before_retry; 400 → never_retry
// validation_error; 401/403 → never_retry authorization_denied (a 403 after
// 429 storms is an account block: stop and alert). A failed search before a
// create sent nothing: retry.
//
// Imports: adapters, operation, redact (its Secret type) and the standard
// library.
package amocrm
