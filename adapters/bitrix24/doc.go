// Package bitrix24 is the idemgate adapter for Bitrix24 CRM (target system
// "crm"), through an incoming webhook. crm.deal.create becomes crm.deal.add
// and crm.task.create becomes crm.activity.add (a CRM activity of type task:
// unlike tasks.task.add and crm.activity.todo.add it carries the external-ID
// fields). The operation key goes into ORIGIN_ID, our system id into
// ORIGINATOR_ID (docs/targets.md).
//
// The key also goes into the object's text as the marker "[op:<key>]"
// (COMMENTS of a deal, the end of DESCRIPTION of an activity): a second
// carrier for connectors that map only business fields and drop
// ORIGINATOR_ID/ORIGIN_ID. Such an object is found by a marker scan: a list
// filtered by creation time (>=DATE_CREATE for deals [OK] crm-deal-list,
// >=CREATED for activities [??: filterability not confirmed]) from LookupSkew
// before the journal first saw the key (adapters.Attempt; else LookupWindow
// ago), at most LookupMaxPages pages of 50, matched on the marker. A scan
// that stops at the cap without a match is never "not found".
//
// Bitrix24 does not enforce ORIGIN_ID uniqueness, so Execute is
// single-flight per key: under a per-key lock in this process it searches
// (by ORIGIN_ID, and by the marker scan unless the worker says this is the
// key's first attempt, when nothing earlier can exist), returns a found
// object (after checking it holds the same payload, else never_retry
// idempotency_key_payload_mismatch), and only otherwise adds; after an add
// it searches again. Lookup always does both searches. When more than one
// object holds the key, the oldest (lowest ID) is the operation's and the
// others are reported: Outcome.Duplicates, and "duplicates" and
// "duplicate_object_ids" in the stored and published result; the worker
// logs and counts them (idemgate_duplicates_detected_total).
//
// What single-flight does not cover: it lives in one process. Two replicas
// can both search, find nothing and add; the journal's lease (one owner per
// key, fenced by lease_token) keeps a second Execute of one key from
// starting elsewhere, and the search after the add reports what slips
// through while both adds are visible. An add the portal holds longer
// (a dead owner's request queued in the portal) lands after the survivor
// searched: the worker trusts a "not found" only SettleTime after the last
// attempt began, by default twice Timeout (Bitrix24 documents no bound on
// how long it may hold a request [??]); an add held longer still makes a
// second object that the late owner's own search reports if it is alive.
//
// Requests take a slot of the client-side bucket first (RateLimit, default
// 2/s with bursts of 40 under the portal's 50-request bucket leaking 2/s,
// [OK] limits.md): a first attempt costs 3 requests (list, add, re-list), a
// retried one adds the marker scan's pages. Admit reserves a call's first
// three for the worker to wait on before it takes an attempt.
//
// Classification: 503 QUERY_LIMIT_EXCEEDED → retry target_rate_limited (the
// portal's bucket refused it before running it; the client's bucket gives
// up a slot more) and 429 OPERATION_TIME_LIMIT → retry http_429 [??: assumes
// the limiter runs before the method]: a wait, which spends no retry
// budget; 503
// OVERLOAD_LIMIT (a manual block) → never_retry; 500 and timeouts after
// sending → reconcile_before_retry; 400 → never_retry validation_error;
// 401/403 → never_retry authorization_denied. A failed list before the add
// sent nothing, so it is retry. The webhook code is a credential: it is in
// the URL path, and no error ever contains the URL.
//
// Imports: adapters, operation, redact (its Secret type) and the standard
// library.
package bitrix24
