// Package bitrix24 is the idemgate adapter for Bitrix24 CRM (target system
// "crm"), through an incoming webhook. crm.deal.create becomes crm.deal.add
// and crm.task.create becomes crm.activity.add (a CRM activity of type task:
// unlike tasks.task.add and crm.activity.todo.add it carries the external-ID
// fields). The operation key goes into ORIGIN_ID, our system id into
// ORIGINATOR_ID (TARGETS.md §2).
//
// Bitrix24 does not enforce ORIGIN_ID uniqueness, so Execute is
// single-flight per key: under a per-key lock in this process it lists by
// =ORIGINATOR_ID/=ORIGIN_ID, returns a found object (after checking it holds
// the same payload, else never_retry idempotency_key_payload_mismatch), and
// only otherwise adds; after an add it lists again and logs duplicates (the
// oldest, lowest ID, is the one reported from then on).
//
// What single-flight does not cover: it lives in one process. Two replicas,
// or a replica and a restarted one, can both list, find nothing and add. The
// journal's lease (one owner per key, fenced by lease_token) is what keeps a
// second Execute of one key from starting elsewhere; the re-list after add
// detects what slips through while both adds are visible (e.g. a lease that
// expired during a slow call) and logs it with error_code duplicate_objects
// for an operator. It cannot see an add that lands later still: a dead
// owner's request queued in the portal beyond the reconciler's settle time
// (at least the call timeout) makes a second activity nobody reports — the
// article's residual double-write window for a target without uniqueness.
// Raise settle_time to the longest the portal may hold a request.
//
// Behind a connector that drops ORIGIN_ID the object is stored without our
// key: the re-list finds nothing (logged, key_stored=false) and a replay
// creates a second object — the article's residual double-write window.
//
// Classification: 503 QUERY_LIMIT_EXCEEDED and 429 OPERATION_TIME_LIMIT →
// retry [??: assumes the limiter runs before the method]; 503
// OVERLOAD_LIMIT (a manual block) → never_retry; 500 and timeouts after
// sending → reconcile_before_retry; 400 → never_retry validation_error;
// 401/403 → never_retry authorization_denied. A failed list before the add
// sent nothing, so it is retry. The webhook code is a credential: it is in
// the URL path, and no error ever contains the URL.
//
// Imports: adapters, operation, redact (its Secret type) and the standard
// library.
package bitrix24
