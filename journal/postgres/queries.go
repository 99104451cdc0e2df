package postgres

import "github.com/idemgate/idemgate/journal/internal/sqljournal"

// The journal's SQL, as static named queries. Batches travel as parallel
// arrays unnested on the server, so a batch of any size is one statement.

// claimFirst is a batch's claim in one statement, for every key the batch
// sends (sorted, so that concurrent batches lock in one order): a new key is
// inserted as started with a lease and its first attempt in the row
// (first_attempt_inline); an existing key is left alone (ON CONFLICT DO
// NOTHING) and its row read. Each row comes back with inserted: the rows the
// insert made, then the rows that existed, read from the statement's
// snapshot, which does not see its own insert. A batch of replays inserts
// nothing, so its transaction gets no id and its commit waits for no WAL
// flush. A key found neither way was inserted by a concurrent batch that
// committed after the snapshot (or its row was purged and made again): it
// goes to claimRound; so does an existing row that a take-over may claim.
// The insert's keys may also come back read (purged under the snapshot and
// inserted again): the inserted row is the one that counts.
const claimFirst = `
WITH ins AS (` + insertNew + `
    RETURNING ` + recordColumns + `, true AS inserted
)
SELECT * FROM ins
UNION ALL
SELECT ` + recordColumns + `, false FROM agent_operation_log WHERE operation_key = ANY($1::text[])`

// claimInsert is claimRound's insert of new keys, as claimFirst's, for the
// keys a first statement left undecided.
const claimInsert = insertNew + `
RETURNING l.operation_key`

// insertNew inserts a batch's new keys as started, each with a lease and its
// first attempt in its row (first_attempt_inline); an existing key is left
// alone (ON CONFLICT DO NOTHING). Its parameters are claimArgs'; the keys
// arrive sorted, so that concurrent batches lock in one order. The caller
// adds RETURNING.
const insertNew = `
INSERT INTO agent_operation_log AS l
    (operation_key, operation_type, request_hash, status, target_system,
     event_id, approval_id, lease_owner, lease_token, lease_until, field_digests, first_attempt_inline)
SELECT operation_key, operation_type, request_hash, 'started', target_system,
       event_id, approval_id, owner, 1, now() + ttl_ms * interval '1 millisecond', nullif(field_digests, ''), true
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[])
    WITH ORDINALITY AS t(operation_key, operation_type, request_hash, target_system, event_id, approval_id, owner, ttl_ms, field_digests, ord)
ORDER BY ord
ON CONFLICT (operation_key) DO NOTHING`

// inlineColumns are what a statement that starts another attempt reads of
// the row it takes (as cand), for firstAttempt: the first attempt the row
// may still hold.
const inlineColumns = `l.first_attempt_inline, l.attempt_count AS first_attempt, l.lease_token AS first_token,
           coalesce(l.lease_owner, '') AS first_worker, l.created_at AS first_started,
           l.first_finished_at, l.first_outcome, l.first_error_code, l.first_request_id, l.first_note, l.first_trace_id`

// firstAttempt writes, in a statement that starts another attempt on the
// rows of cand (read with inlineColumns), the first attempt a row still
// holds into the trail: closed as it ended, or as abandoned when it never
// reported (a take-over's rule for an attempt open under an older token).
// The statement's update clears the row's copy (clearInline).
const firstAttempt = `), first AS (
    INSERT INTO agent_operation_attempts
        (operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
         outcome, error_code, target_request_id, note, trace_id)
    SELECT operation_key, first_attempt, first_token, first_worker, 'execute', first_started,
           coalesce(first_finished_at, now()), coalesce(first_outcome, 'abandoned'),
           first_error_code, first_request_id, first_note, first_trace_id
    FROM cand WHERE first_attempt_inline
`

// clearInline is the update's part of firstAttempt: the row holds no attempt
// of its own any more.
const clearInline = `
        first_attempt_inline = false, first_finished_at = NULL, first_outcome = NULL,
        first_error_code = NULL, first_request_id = NULL, first_note = NULL, first_trace_id = NULL,`

// openByKey: the statements that find a batch's rows by key and keep to the
// open ones (the take-over, the completion, the heartbeat) name the statuses
// a row must not have, not the ones it may have. Both say the same (the
// status column's CHECK lists five), but "status IN ('started', 'unknown')"
// matches the predicate of the index of open operations, and the planner
// then reads that whole index and hash-joins it with the batch instead of
// looking each key up in the primary key: measured, every completion of a
// bench run read the index entries of every row completed since the last
// vacuum (4,080 for a batch of 80), a cost that grows with the write rate
// until autovacuum catches up.

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
// wins. A first attempt the row holds goes into the trail (firstAttempt);
// attempts still open under an older token are closed as abandoned.
const claimTakeOver = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
        AS t(operation_key, request_hash, owner, ttl_ms)
), cand AS (
    SELECT l.operation_key, l.status AS old_status, ` + inlineColumns + `
    FROM agent_operation_log l JOIN input i USING (operation_key)
    WHERE l.request_hash = i.request_hash
      AND l.status NOT IN ('succeeded', 'failed_final') -- openByKey
      AND (l.lease_until IS NULL OR l.lease_until < now())
    ORDER BY l.operation_key
    FOR UPDATE OF l
), upd AS (
    UPDATE agent_operation_log l SET` + clearInline + `
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
` + firstAttempt + abandoned + `SELECT operation_key, old_status FROM upd`

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
// and closes each attempt: in the row while it holds its first attempt (the
// common case writes one row), else its row in the trail. An unknown or failed_retryable
// outcome may be held (hold_ms): lease_until is then its end.
var complete = `
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
        effect_possible  = l.effect_possible OR i.status = 'unknown',` + sqljournal.EndFirstAttempt("l.",
	"first_finished_at", "now()", "first_outcome", "i.status", "first_error_code", "nullif(i.error_code, '')",
	"first_request_id", "nullif(i.request_id, '')", "first_note", "nullif(i.note, '')") + `
    FROM input i
    WHERE l.operation_key = i.operation_key
      AND l.lease_token = i.token
      AND l.status NOT IN ('succeeded', 'failed_final', 'failed_retryable') -- openByKey
    RETURNING l.operation_key, l.lease_token, l.first_attempt_inline
), att AS (
    UPDATE agent_operation_attempts a SET
        finished_at       = now(),
        outcome           = i.status,
        error_code        = nullif(i.error_code, ''),
        target_request_id = nullif(i.request_id, ''),
        note              = nullif(i.note, '')
    FROM upd u JOIN input i USING (operation_key)
    WHERE NOT u.first_attempt_inline
      AND a.operation_key = u.operation_key AND a.lease_token = u.lease_token AND a.finished_at IS NULL
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
  AND l.status NOT IN ('succeeded', 'failed_final', 'failed_retryable') -- openByKey
RETURNING l.operation_key`

// takeOverStale is the reconciler's scan: unknown outcomes and expired leases,
// SKIP LOCKED so that replicas share the work, oldest first. A started row
// whose lease expired had its owner die mid-call: its effect is possible.
// Attempts still open under an older token are closed as abandoned.
const takeOverStale = `
WITH cand AS (
    SELECT l.operation_key, l.status AS old_status, ` + inlineColumns + `
    FROM agent_operation_log l
    WHERE (l.status = 'unknown' AND (l.lease_until IS NULL OR l.lease_until < now()))
       OR (l.status = 'started' AND l.lease_until < now())
    ORDER BY l.updated_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE agent_operation_log l SET` + clearInline + `
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
` + firstAttempt + abandoned + `SELECT operation_key FROM upd`

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
       coalesce(l.status = 'started' AND l.lease_until >= now() AND (
           (l.first_attempt_inline AND l.first_finished_at IS NULL) OR EXISTS (
           SELECT 1 FROM agent_operation_attempts a
           WHERE a.operation_key = l.operation_key AND a.lease_token = l.lease_token
             AND a.kind = 'execute' AND a.finished_at IS NULL)), false)
FROM agent_operation_log l
WHERE l.operation_key = $1`

// resolve records an operator's decision that resolveCheck's row, locked in
// the same transaction, admits, with a new fencing token so that a late
// reconciler or worker cannot overwrite it; the trail gets the operator's
// attempt. Attempts still open under the old token are closed as abandoned.
// $1 key, $2 status, $3 object id, $4 error code, $5 operator, $6 note.
const resolve = `
WITH cand AS (
    SELECT l.operation_key, ` + inlineColumns + `
    FROM agent_operation_log l WHERE l.operation_key = $1
), upd AS (
    UPDATE agent_operation_log l SET` + clearInline + `
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
` + firstAttempt + abandoned + `SELECT operation_key FROM upd`

// raiseForReview marks unknown operations raised for review, once.
const raiseForReview = `
UPDATE agent_operation_log SET raised_at = now()
WHERE operation_key = ANY($1::text[]) AND status = 'unknown' AND raised_at IS NULL
RETURNING operation_key`

// selectAttempts reads a key's trail: the first attempt its row holds, if it
// does, and the table's.
const selectAttempts = `
SELECT operation_key, attempt_count, lease_token, coalesce(lease_owner, ''), 'execute', created_at, first_finished_at,
       coalesce(first_outcome, ''), coalesce(first_error_code, ''), coalesce(first_request_id, ''), coalesce(first_note, '')
FROM agent_operation_log WHERE operation_key = $1 AND first_attempt_inline
UNION ALL
SELECT operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
       coalesce(outcome, ''), coalesce(error_code, ''), coalesce(target_request_id, ''), coalesce(note, '')
FROM agent_operation_attempts WHERE operation_key = $1
ORDER BY 6, 3`

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
	// AttemptCounts counts the trail's attempts and the rows' own: a row
	// ended at its first attempt's end, found by the index of completed
	// rows, or is still open (the index of the open rows).
	AttemptCounts: `SELECT kind, outcome, count(*) FROM (
    SELECT kind, outcome FROM agent_operation_attempts WHERE finished_at IS NOT NULL AND finished_at >= $1
    UNION ALL
    SELECT 'execute', first_outcome FROM agent_operation_log
    WHERE status IN ('succeeded', 'failed_final') AND completed_at >= $1
      AND first_attempt_inline AND first_finished_at >= $1
    UNION ALL
    SELECT 'execute', first_outcome FROM agent_operation_log
    WHERE status IN ('started', 'failed_retryable', 'unknown')
      AND first_attempt_inline AND first_finished_at >= $1
) a GROUP BY kind, outcome ORDER BY kind, outcome`,
	LeaseHolders: `SELECT lease_owner, count(*), max(lease_until) FROM agent_operation_log
WHERE status = 'started' AND lease_until >= now() AND lease_owner IS NOT NULL
GROUP BY lease_owner ORDER BY lease_owner`,
	// TraceIDs reads the recorded trace ids of a key's attempts.
	TraceIDs: `SELECT lease_token, first_trace_id FROM agent_operation_log
WHERE operation_key = $1 AND first_attempt_inline AND first_trace_id IS NOT NULL
UNION ALL
SELECT lease_token, trace_id FROM agent_operation_attempts
WHERE operation_key = $1 AND trace_id IS NOT NULL`,
	Searches: searches,
}

// HotPathSQL are the statements of the claim and completion path, as the
// store sends them: a baseline that must do the store's exact work
// (internal/rawbaseline, the raw loop of worker's benchmark and of
// scripts/e2ebench) sends these, so it cannot drift from the store.
type HotPathSQL struct {
	// ClaimFirst is a batch's claim: it inserts the new keys (each with its
	// first attempt in its row) and reads the others' rows; each row
	// (RecordColumns, lease_live, db_now) ends with inserted. Its arguments:
	// keys, operation types, request hashes, targets, event ids, approval
	// ids, owners (text[]), lease TTLs in ms (bigint[]), field digests
	// (text[]), keys sorted.
	ClaimFirst string
	// Complete is the batched completion.
	Complete string
}

// HotPath returns the claim and completion statements.
func HotPath() HotPathSQL {
	return HotPathSQL{ClaimFirst: claimFirst, Complete: complete}
}
