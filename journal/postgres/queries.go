package postgres

import "github.com/idemgate/idemgate/journal/internal/sqljournal"

// The journal's SQL, as static named queries. Batches travel as parallel
// arrays unnested on the server, so a batch of any size is one statement.

// claimInsert is the atomic claim for a batch: a new key is
// inserted as started with a lease; an existing key is left alone (ON CONFLICT
// DO NOTHING) and decided by the statements that follow. Keys arrive sorted so
// that concurrent batches lock in one order.
const claimInsert = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[])
        WITH ORDINALITY AS t(operation_key, operation_type, request_hash, target_system, event_id, approval_id, owner, ttl_ms, field_digests, ord)
), ins AS (
    INSERT INTO agent_operation_log AS l
        (operation_key, operation_type, request_hash, status, target_system,
         event_id, approval_id, lease_owner, lease_token, lease_until, field_digests)
    SELECT operation_key, operation_type, request_hash, 'started', target_system,
           event_id, approval_id, owner, 1, now() + ttl_ms * interval '1 millisecond', nullif(field_digests, '')
    FROM input ORDER BY ord
    ON CONFLICT (operation_key) DO NOTHING
    RETURNING l.operation_key, l.lease_token, l.attempt_count, l.lease_owner
), att AS (
    INSERT INTO agent_operation_attempts (operation_key, attempt, lease_token, worker, kind)
    SELECT operation_key, attempt_count, lease_token, lease_owner, 'execute' FROM ins
)
SELECT operation_key FROM ins`

// abandoned closes, in a statement whose upd gave rows (operation_key,
// lease_token) a new token, the attempts still open under an older token as
// abandoned: a take-over's rule, in each statement that takes rows over.
const abandoned = `), abandoned AS (
    UPDATE agent_operation_attempts a SET finished_at = now(), outcome = 'abandoned'
    FROM upd u
    WHERE a.operation_key = u.operation_key AND a.lease_token < u.lease_token AND a.finished_at IS NULL
)
`

// claimTakeOver takes existing rows over by conditional update, locking only
// rows whose state may change: a retryable failure whose hold has passed is
// re-claimed (a new attempt), and an unknown outcome or an expired lease is
// taken over for reconciliation (a started row whose lease expired had its
// owner die mid-call: its effect is possible). The request hash must match;
// a mismatch is decided later as a conflict. FOR UPDATE re-checks the
// condition after waiting for a concurrent claimer, so only one of them
// wins. Attempts still open under an older token are closed as abandoned.
const claimTakeOver = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
        AS t(operation_key, request_hash, owner, ttl_ms)
), cand AS (
    SELECT l.operation_key, l.status AS old_status
    FROM agent_operation_log l JOIN input i USING (operation_key)
    WHERE l.request_hash = i.request_hash
      AND l.status IN ('failed_retryable', 'started', 'unknown')
      AND (l.lease_until IS NULL OR l.lease_until < now())
    ORDER BY l.operation_key
    FOR UPDATE OF l
), upd AS (
    UPDATE agent_operation_log l SET
        status          = CASE WHEN c.old_status = 'failed_retryable' THEN 'started' ELSE l.status END,
        attempt_count   = CASE WHEN c.old_status = 'failed_retryable' THEN l.attempt_count + 1 ELSE l.attempt_count END,
        effect_possible = l.effect_possible OR c.old_status <> 'failed_retryable',
        lease_owner     = i.owner,
        lease_token     = l.lease_token + 1,
        lease_until     = now() + i.ttl_ms * interval '1 millisecond',
        updated_at      = now()
    FROM cand c JOIN input i USING (operation_key)
    WHERE l.operation_key = c.operation_key
    RETURNING l.operation_key, c.old_status, l.lease_token, l.attempt_count, l.lease_owner
), att AS (
    INSERT INTO agent_operation_attempts (operation_key, attempt, lease_token, worker, kind)
    SELECT operation_key, attempt_count, lease_token, lease_owner,
           CASE WHEN old_status = 'failed_retryable' THEN 'execute' ELSE 'reconcile' END
    FROM upd
` + abandoned + `SELECT operation_key, old_status FROM upd`

// recordColumns is the column list every read scans with storedRecord: the
// row, whether its lease or hold is live, and the database clock of the
// read.
const recordColumns = sqljournal.RecordColumns + `,
    (lease_until IS NOT NULL AND lease_until >= now()) AS lease_live, now() AS db_now`

// selectRecords reads rows with a plain SELECT: replaying a terminal row takes
// no lock and writes nothing.
const selectRecords = `SELECT ` + recordColumns + ` FROM agent_operation_log WHERE operation_key = ANY($1::text[])`

const selectRecord = `SELECT ` + recordColumns + ` FROM agent_operation_log WHERE operation_key = $1`

// complete applies outcomes under their fencing tokens, from legal states only,
// and closes each attempt's row in the trail. An unknown or failed_retryable
// outcome may be held (hold_ms): lease_until is then its end.
const complete = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bool[], $10::bigint[])
        AS t(operation_key, token, status, object_id, result, error_code, request_id, note, reconciled, hold_ms)
), upd AS (
    UPDATE agent_operation_log l SET
        status           = i.status,
        target_object_id = coalesce(nullif(i.object_id, ''), l.target_object_id),
        response_json    = coalesce(i.result::jsonb, l.response_json),
        error_code       = nullif(i.error_code, ''),
        lease_until      = CASE WHEN i.status IN ('unknown', 'failed_retryable') AND i.hold_ms > 0
                                THEN now() + i.hold_ms * interval '1 millisecond' END,
        updated_at       = now(),
        completed_at     = CASE WHEN i.status IN ('succeeded', 'failed_final') THEN now() END,
        reconcile_rounds = CASE WHEN i.status = 'unknown' AND i.reconciled THEN l.reconcile_rounds + 1
                                WHEN i.status = 'unknown' THEN l.reconcile_rounds ELSE 0 END,
        reconcile_rounds_total = l.reconcile_rounds_total
                                 + CASE WHEN i.status = 'unknown' AND i.reconciled THEN 1 ELSE 0 END,
        effect_possible  = l.effect_possible OR i.status = 'unknown'
    FROM input i
    WHERE l.operation_key = i.operation_key
      AND l.lease_token = i.token
      AND l.status IN ('started', 'unknown')
    RETURNING l.operation_key, l.lease_token
), att AS (
    UPDATE agent_operation_attempts a SET
        finished_at       = now(),
        outcome           = i.status,
        error_code        = nullif(i.error_code, ''),
        target_request_id = nullif(i.request_id, ''),
        note              = nullif(i.note, '')
    FROM upd u JOIN input i USING (operation_key)
    WHERE a.operation_key = u.operation_key AND a.lease_token = u.lease_token AND a.finished_at IS NULL
)
SELECT operation_key FROM upd`

// fenceAttempts closes the attempts of completions refused for a stale
// token as fenced (also one a take-over closed as abandoned: its worker now
// reports), the note saying what the worker found. It runs only for the
// items a completion found stale, never on the group commit's hot path.
const fenceAttempts = `
UPDATE agent_operation_attempts a SET
    finished_at       = now(),
    outcome           = 'fenced',
    error_code        = coalesce(nullif(i.error_code, ''), a.error_code),
    target_request_id = coalesce(nullif(i.request_id, ''), a.target_request_id),
    note              = 'lease taken over before this outcome was recorded: ' || i.status
                        || CASE WHEN i.object_id <> '' THEN ' (object ' || i.object_id || ')' ELSE '' END
                        || CASE WHEN i.note <> '' THEN '; ' || i.note ELSE '' END
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
    AS i(operation_key, token, status, object_id, error_code, request_id, note)
WHERE a.operation_key = i.operation_key
  AND a.lease_token = i.token
  AND (a.finished_at IS NULL OR a.outcome = 'abandoned')`

// completeCheck reads what a completion that did not apply found, to tell a
// stale token from an illegal state from one already applied.
const completeCheck = `SELECT operation_key, status, lease_token FROM agent_operation_log WHERE operation_key = ANY($1::text[])`

const heartbeat = `
UPDATE agent_operation_log l SET
    lease_until = now() + $3::bigint * interval '1 millisecond',
    updated_at  = now()
FROM unnest($1::text[], $2::bigint[]) AS i(operation_key, token)
WHERE l.operation_key = i.operation_key
  AND l.lease_token = i.token
  AND l.status IN ('started', 'unknown')
RETURNING l.operation_key`

// takeOverStale is the reconciler's scan: unknown outcomes and expired leases,
// SKIP LOCKED so that replicas share the work, oldest first. A started row
// whose lease expired had its owner die mid-call: its effect is possible.
// Attempts still open under an older token are closed as abandoned.
const takeOverStale = `
WITH cand AS (
    SELECT operation_key, status AS old_status FROM agent_operation_log
    WHERE (status = 'unknown' AND (lease_until IS NULL OR lease_until < now()))
       OR (status = 'started' AND lease_until < now())
    ORDER BY updated_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE agent_operation_log l SET
        lease_owner     = $1,
        lease_token     = l.lease_token + 1,
        lease_until     = now() + $2::bigint * interval '1 millisecond',
        updated_at      = now(),
        effect_possible = true
    FROM cand c
    WHERE l.operation_key = c.operation_key
    RETURNING l.operation_key, l.lease_token, l.attempt_count
), att AS (
    INSERT INTO agent_operation_attempts (operation_key, attempt, lease_token, worker, kind)
    SELECT operation_key, attempt_count, lease_token, $1, 'reconcile' FROM upd
` + abandoned + `SELECT operation_key FROM upd`

// resolveLock locks the row an operator's decision is about, before
// resolveCheck reads it. They must be two statements: under READ COMMITTED
// a statement that waited for a row lock sees the row's new version but the
// other tables as they were when it began, so a check that waited behind a
// worker's claim would see the new started lease without the execute
// attempt that claim opened, and let an unforced decision overwrite a call
// in flight. $1 key.
const resolveLock = `SELECT 1 FROM agent_operation_log WHERE operation_key = $1 FOR UPDATE`

// resolveCheck reads what an operator's decision needs to know about the row
// resolveLock locked (journal.Resolution.Applies decides): its status, lease
// owner, and whether a live execute holds it (a started row whose lease runs
// and whose current attempt is an open execute: a call may be in flight).
// $1 key.
const resolveCheck = `
SELECT l.status, coalesce(l.lease_owner, ''),
       coalesce(l.status = 'started' AND l.lease_until >= now() AND EXISTS (
           SELECT 1 FROM agent_operation_attempts a
           WHERE a.operation_key = l.operation_key AND a.lease_token = l.lease_token
             AND a.kind = 'execute' AND a.finished_at IS NULL), false)
FROM agent_operation_log l
WHERE l.operation_key = $1`

// resolve records an operator's decision that resolveCheck's row, locked in
// the same transaction, admits, with a new fencing token so that a late
// reconciler or worker cannot overwrite it; the trail gets the operator's
// attempt. Attempts still open under the old token are closed as abandoned.
// $1 key, $2 status, $3 object id, $4 error code, $5 operator, $6 note.
const resolve = `
WITH upd AS (
    UPDATE agent_operation_log l SET
        status           = $2,
        target_object_id = coalesce(nullif($3, ''), l.target_object_id),
        error_code       = nullif($4, ''),
        lease_owner      = $5,
        lease_token      = l.lease_token + 1,
        lease_until      = NULL,
        reconcile_rounds = 0,
        updated_at       = now(),
        completed_at     = now()
    WHERE l.operation_key = $1
    RETURNING l.operation_key, l.lease_token, l.attempt_count
), att AS (
    INSERT INTO agent_operation_attempts
        (operation_key, attempt, lease_token, worker, kind, finished_at, outcome, error_code, note)
    SELECT operation_key, attempt_count, lease_token, $5, 'operator', now(), $2, nullif($4, ''), $6
    FROM upd
` + abandoned + `SELECT operation_key FROM upd`

// raiseForReview marks unknown operations raised for review, once.
const raiseForReview = `
UPDATE agent_operation_log SET raised_at = now()
WHERE operation_key = ANY($1::text[]) AND status = 'unknown' AND raised_at IS NULL
RETURNING operation_key`

const selectAttempts = `
SELECT operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
       coalesce(outcome, ''), coalesce(error_code, ''), coalesce(target_request_id, ''), coalesce(note, '')
FROM agent_operation_attempts WHERE operation_key = $1
ORDER BY started_at, lease_token`

const listUnresolved = `SELECT ` + recordColumns + ` FROM agent_operation_log
WHERE status = 'unknown' AND reconcile_rounds >= $1
ORDER BY created_at LIMIT $2`

// listIdleRetryable: idle since the row was last touched or, when held,
// since its hold ended.
const listIdleRetryable = `SELECT ` + recordColumns + ` FROM agent_operation_log
WHERE status = 'failed_retryable'
  AND greatest(updated_at, lease_until) < now() - $1::bigint * interval '1 millisecond'
ORDER BY updated_at LIMIT $2`

// purge deletes terminal rows in bounded chunks; never started,
// failed_retryable or unknown rows. Attempts go with them (ON DELETE CASCADE).
const purge = `
DELETE FROM agent_operation_log WHERE operation_key IN (
    SELECT operation_key FROM agent_operation_log
    WHERE status IN ('succeeded', 'failed_final')
      AND completed_at < $1
      AND ($2 = '' OR operation_type = $2)
    LIMIT $3
)`

const selectNow = `SELECT now()`

// readSQL are the statements of the plain reads (sqljournal.Reader).
var readSQL = sqljournal.ReadSQL{
	Record: selectRecord,
	// FieldDigests reads the per-field digests of a key's first request.
	FieldDigests:      `SELECT coalesce(field_digests, '') FROM agent_operation_log WHERE operation_key = $1`,
	Attempts:          selectAttempts,
	ListUnresolved:    listUnresolved,
	ListIdleRetryable: listIdleRetryable,
	AttemptCounts: `SELECT kind, outcome, count(*) FROM agent_operation_attempts
WHERE finished_at IS NOT NULL AND finished_at >= $1 GROUP BY kind, outcome ORDER BY kind, outcome`,
	LeaseHolders: `SELECT lease_owner, count(*), max(lease_until) FROM agent_operation_log
WHERE status = 'started' AND lease_until >= now() AND lease_owner IS NOT NULL
GROUP BY lease_owner ORDER BY lease_owner`,
	// TraceIDs reads the recorded trace ids of a key's attempts.
	TraceIDs: `SELECT lease_token, trace_id FROM agent_operation_attempts
WHERE operation_key = $1 AND trace_id IS NOT NULL`,
	Searches: searches,
}

// HotPathSQL are the statements of the claim and completion path, as the
// store sends them: a baseline that must do the store's exact work
// (internal/rawbaseline, the raw loop of worker's benchmark and of
// scripts/e2ebench) sends these, so it cannot drift from the store.
type HotPathSQL struct {
	// SelectRecords reads rows by key ($1 text[]).
	SelectRecords string
	// ClaimInsert and ClaimTakeOver are the batched claim's two statements.
	ClaimInsert, ClaimTakeOver string
	// Complete is the batched completion.
	Complete string
}

// HotPath returns the claim and completion statements.
func HotPath() HotPathSQL {
	return HotPathSQL{SelectRecords: selectRecords, ClaimInsert: claimInsert, ClaimTakeOver: claimTakeOver, Complete: complete}
}
