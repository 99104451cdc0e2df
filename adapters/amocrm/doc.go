// Package amocrm is the idemgate adapter for amoCRM / Kommo API v4 (target
// system "crm"): crm.deal.create → a lead (POST /api/v4/leads),
// crm.task.create → a task (POST /api/v4/tasks).
//
// amoCRM has no external-ID support and request_id is only echoed, never
// stored (amoCRM's API v4 documentation). So our key is written into the object and searched
// before every create, and every object found is verified exactly, because
// the search is fuzzy:
//
//   - leads: the key goes into a text custom field (KeyFieldID) and a tag,
//     and (KeyInName, default on) as the marker "[op:<key>]" at the end of
//     the name; the search is GET /api/v4/leads?query=<key>, and a lead
//     counts only when the field's value (or, without a field, a tag) equals
//     the key or the name carries the marker;
//   - tasks (no custom fields, no tags): the text ends with the marker
//     "[op:<key>]"; the search scans GET /api/v4/tasks by
//     filter[updated_at] from LookupSkew before the journal first saw the
//     key (adapters.Attempt; else LookupWindow ago), at most LookupMaxPages
//     pages. Pages are numbered, so tasks created during a scan can bring a
//     task twice: each counts once, by id. When the scan stops at the page
//     cap without a match the answer is Indeterminate, never "not found".
//
// A connector that maps only standard fields drops the key field and tags;
// the marker in the name or text still finds the object, and a retry
// returns it instead of creating a second.
//
// Creation is single-flight per key in this process (adapters.KeyLocks);
// across replicas the journal lease is what serialises a key. When more
// than one object holds the key the oldest is the operation's and the
// others are reported (Outcome.Duplicates, the result's "duplicates" and
// "duplicate_object_ids"; the worker logs and counts them): by Lookup, by a
// search before create, and by the search a retried attempt makes after it
// creates (a first attempt does not search again: nothing earlier exists).
// The query search lags behind writes [??: the lag is unconfirmed]: the
// settle time is the larger of 30s and twice Timeout (a create the account
// still holds may land that late [??]), declared in Capabilities, so the
// worker trusts a "not found" only that long after the attempt.
//
// Requests take a slot of the client-side bucket first (RateLimit, default
// 7/s with bursts of 5: amoCRM's 7 requests per second, [OK]).
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
