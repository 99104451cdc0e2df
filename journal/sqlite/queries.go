package sqlite

import "github.com/idemgate/idemgate/journal/internal/sqljournal"

// The journal's SQL, as static named queries. A batch travels as one JSON
// array parameter, each element an array of the item's fields, read with
// json_each; so a batch of any size is one statement per step.
//
// In an UPDATE … FROM json_each, a "+status" keeps SQLite from driving the
// update through an index on the status (the open operations' index: every
// in-flight row) instead of looking each batch item up by its primary key.
//
// Times are INTEGER milliseconds since the Unix epoch on SQLite's clock. A
// write transaction reads that clock once (selectNow) and binds it to every
// statement it runs, as PostgreSQL's now() is fixed for a transaction: a
// lease judged expired by the transaction's read is still expired when its
// update runs.

// nowMS is SQLite's clock in milliseconds.
const nowMS = `CAST(round(unixepoch('subsec') * 1000) AS INTEGER)`

// isOpen is the condition of the partial index of the open operations
// (migration 0004), written as the index writes it: SQLite reads a partial
// index only for a query that carries its condition term for term, so every
// scan of open operations repeats it (the status index of every row is gone
// since migration 0006).
const isOpen = `status IN ('started', 'failed_retryable', 'unknown')`

const selectNow = `SELECT ` + nowMS

// underToken joins a batch's items (?1: [key, token, …]) to the rows they
// name under the item's fencing token: a completion, a heartbeat or an
// attempt applies only under its own token.
const underToken = `
FROM json_each(?1) AS i
WHERE operation_key = i.value ->> 0
  AND lease_token = i.value ->> 1`

// openUnderToken is underToken on a row still open (started or unknown),
// returning the keys it changed.
const openUnderToken = underToken + `
  AND +status IN ('started', 'unknown')
RETURNING operation_key`

// recordColumns is the column list every read scans with storedRecord; two
// trailing columns follow it: lease_live (the lease or hold is live) and the
// clock the read judged it by.
const recordColumns = sqljournal.RecordColumns

// liveNow is the two trailing columns judged on SQLite's clock now.
const liveNow = `,
    (lease_until IS NOT NULL AND lease_until >= ` + nowMS + `), ` + nowMS

// selectRecords reads rows with a plain SELECT on the reader pool, judging
// leases on SQLite's clock: replaying a terminal row takes no write lock.
// ?1 is a JSON array of keys.
const selectRecords = `SELECT ` + recordColumns + liveNow + `
FROM agent_operation_log WHERE operation_key IN (SELECT value FROM json_each(?1))`

// selectRecordsAt is selectRecords inside a write transaction, judging leases
// at the transaction's time ?2.
const selectRecordsAt = `SELECT ` + recordColumns + `,
    (lease_until IS NOT NULL AND lease_until >= ?2), ?2
FROM agent_operation_log WHERE operation_key IN (SELECT value FROM json_each(?1))`

const selectRecord = `SELECT ` + recordColumns + liveNow + `
FROM agent_operation_log WHERE operation_key = ?1`

// claimInsert is the atomic claim for the keys a write
// transaction found absent: each is inserted as started with a lease and its
// first attempt in the row (first_attempt_inline). ON
// CONFLICT DO NOTHING keeps the claim atomic even so. ?1 is a JSON array of
// [key, operation_type, request_hash, target_system, event_id, approval_id,
// owner, ttl_ms, field_digests]; ?2 is the transaction's time. (WHERE true:
// SQLite's parser needs it before ON CONFLICT in an INSERT … SELECT.)
const claimInsert = `
INSERT INTO agent_operation_log
    (operation_key, operation_type, request_hash, status, target_system,
     event_id, approval_id, lease_owner, lease_token, lease_until, created_at, updated_at,
     field_digests, first_attempt_inline)
SELECT i.value ->> 0, i.value ->> 1, i.value ->> 2, 'started', i.value ->> 3,
       i.value ->> 4, i.value ->> 5, i.value ->> 6, 1, ?2 + (i.value ->> 7), ?2, ?2,
       nullif(i.value ->> 8, ''), 1
FROM json_each(?1) AS i
WHERE true
ON CONFLICT (operation_key) DO NOTHING
RETURNING ` + recordColumns + `, 1, ?2`

// claimRetry re-claims retryable failures with the same request hash whose
// hold has passed: a new attempt under a new fencing token. ?1 is a JSON
// array of [key, request_hash, owner, ttl_ms]; ?2 is the transaction's time.
const claimRetry = `
UPDATE agent_operation_log SET
    status        = 'started',
    attempt_count = attempt_count + 1,
    lease_owner   = i.value ->> 2,
    lease_token   = lease_token + 1,
    lease_until   = ?2 + (i.value ->> 3),
    updated_at    = ?2
FROM json_each(?1) AS i
WHERE operation_key = i.value ->> 0
  AND request_hash = i.value ->> 1
  AND +status = 'failed_retryable'
  AND (lease_until IS NULL OR lease_until < ?2)
RETURNING ` + recordColumns + `, 1, ?2`

// claimTakeOver takes over unknown outcomes and expired leases with the same
// request hash for reconciliation: same status and attempt, new fencing
// token. A started row whose lease expired had its owner die mid-call: its
// effect is possible. Same parameters as claimRetry.
const claimTakeOver = `
UPDATE agent_operation_log SET
    lease_owner     = i.value ->> 2,
    lease_token     = lease_token + 1,
    lease_until     = ?2 + (i.value ->> 3),
    updated_at      = ?2,
    effect_possible = 1
FROM json_each(?1) AS i
WHERE operation_key = i.value ->> 0
  AND request_hash = i.value ->> 1
  AND +status IN ('started', 'unknown')
  AND (lease_until IS NULL OR lease_until < ?2)
RETURNING ` + recordColumns + `, 1, ?2`

// insertAttempts opens one row of the attempts trail per lease taken. ?1 is a
// JSON array of [key, kind]; each row copies the lease from the journal row.
const insertAttempts = `
INSERT INTO agent_operation_attempts (operation_key, attempt, lease_token, worker, kind, started_at)
SELECT l.operation_key, l.attempt_count, l.lease_token, l.lease_owner, i.value ->> 1, l.updated_at
FROM json_each(?1) AS i JOIN agent_operation_log AS l ON l.operation_key = i.value ->> 0`

// moveFirstAttempts writes the first attempts that the rows of keys ?1 (a
// JSON array) still hold into the trail: closed as they ended or, open, as
// abandoned at ?2, the transaction's time. It runs before a statement starts
// another attempt on those rows (their lease owner and token are still the
// first attempt's); clearFirstAttempts then clears the rows' copies.
const moveFirstAttempts = `
INSERT INTO agent_operation_attempts
    (operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
     outcome, error_code, target_request_id, note, trace_id)
SELECT operation_key, attempt_count, lease_token, coalesce(lease_owner, ''), 'execute', created_at,
       coalesce(first_finished_at, ?2), coalesce(first_outcome, 'abandoned'),
       first_error_code, first_request_id, first_note, first_trace_id
FROM agent_operation_log
WHERE operation_key IN (SELECT value FROM json_each(?1)) AND first_attempt_inline`

const clearFirstAttempts = `
UPDATE agent_operation_log SET
    first_attempt_inline = 0, first_finished_at = NULL, first_outcome = NULL,
    first_error_code = NULL, first_request_id = NULL, first_note = NULL, first_trace_id = NULL
WHERE operation_key IN (SELECT value FROM json_each(?1)) AND first_attempt_inline`

// abandonAttempts closes, as abandoned, the attempts still open under a
// token older than the row's: their lease was just taken over. ?1 is a JSON
// array of keys; ?2 the transaction's time.
const abandonAttempts = `
UPDATE agent_operation_attempts SET finished_at = ?2, outcome = 'abandoned'
WHERE operation_key IN (SELECT value FROM json_each(?1))
  AND finished_at IS NULL
  AND lease_token < (SELECT l.lease_token FROM agent_operation_log AS l
                     WHERE l.operation_key = agent_operation_attempts.operation_key)`

// complete applies outcomes under their fencing tokens, from legal states
// only, closing the first attempt in the row while the row holds it (the
// trail's rows are closed by completeAttempts). An unknown or
// failed_retryable outcome may be held (hold_ms):
// lease_until is then its end. ?1 is a JSON array of [key, token, status,
// object_id, result or null, error_code, request_id, note, reconciled 0/1,
// hold_ms]; ?2 is the transaction's time.
var complete = `
UPDATE agent_operation_log SET
    status           = i.value ->> 2,
    target_object_id = coalesce(nullif(i.value ->> 3, ''), target_object_id),
    response_json    = coalesce(json(i.value ->> 4), response_json),
    error_code       = nullif(i.value ->> 5, ''),
    lease_until      = CASE WHEN i.value ->> 2 IN ('unknown', 'failed_retryable') AND i.value ->> 9 > 0
                            THEN ?2 + (i.value ->> 9) END,
    updated_at       = ?2,
    completed_at     = CASE WHEN i.value ->> 2 IN ('succeeded', 'failed_final') THEN ?2 END,
    reconcile_rounds = CASE WHEN i.value ->> 2 = 'unknown' AND i.value ->> 8 THEN reconcile_rounds + 1
                            WHEN i.value ->> 2 = 'unknown' THEN reconcile_rounds ELSE 0 END,
    reconcile_rounds_total = reconcile_rounds_total
                             + CASE WHEN i.value ->> 2 = 'unknown' AND i.value ->> 8 THEN 1 ELSE 0 END,
    effect_possible  = effect_possible OR i.value ->> 2 = 'unknown',` + sqljournal.EndFirstAttempt("",
	"first_outcome", "i.value ->> 2", "first_error_code", "nullif(i.value ->> 5, '')", "first_request_id", "nullif(i.value ->> 6, '')",
	"first_note", "nullif(i.value ->> 7, '')", "first_finished_at", "?2") + openUnderToken

// completeAttempts closes the attempts of the completions that applied, once.
// Same parameters as complete, restricted to the applied items.
const completeAttempts = `
UPDATE agent_operation_attempts SET
    finished_at       = ?2,
    outcome           = i.value ->> 2,
    error_code        = nullif(i.value ->> 5, ''),
    target_request_id = nullif(i.value ->> 6, ''),
    note              = nullif(i.value ->> 7, '')` + underToken + `
  AND finished_at IS NULL`

// fenceAttempts closes the attempts of completions refused for a stale
// token as fenced (also one a take-over closed as abandoned: its worker now
// reports), the note saying what the worker found. Same parameters as
// complete, restricted to the stale items.
const fenceAttempts = `
UPDATE agent_operation_attempts SET
    finished_at       = ?2,
    outcome           = 'fenced',
    error_code        = coalesce(nullif(i.value ->> 5, ''), error_code),
    target_request_id = coalesce(nullif(i.value ->> 6, ''), target_request_id),
    note              = 'lease taken over before this outcome was recorded: ' || (i.value ->> 2)
                        || CASE WHEN i.value ->> 3 <> '' THEN ' (object ' || (i.value ->> 3) || ')' ELSE '' END
                        || CASE WHEN i.value ->> 7 <> '' THEN '; ' || (i.value ->> 7) ELSE '' END` + underToken + `
  AND (finished_at IS NULL OR outcome = 'abandoned')`

// completeCheck reads what a completion that did not apply found, to tell a
// stale token from an illegal state from one already applied. ?1 is a JSON
// array of keys.
const completeCheck = `SELECT operation_key, status, lease_token FROM agent_operation_log
WHERE operation_key IN (SELECT value FROM json_each(?1))`

// heartbeat extends leases still held with these tokens. ?1 is a JSON array
// of [key, token]; ?2 the transaction's time; ?3 the TTL in milliseconds.
const heartbeat = `
UPDATE agent_operation_log SET
    lease_until = ?2 + ?3,
    updated_at  = ?2` + openUnderToken

// takeOverStale is the reconciler's scan: the keys of unknown outcomes
// nobody holds and of expired leases, oldest first. The single writer
// serialises callers, and the same write transaction takes them over
// (takeOverKeys), so no row is handed out twice. ?1 the transaction's time,
// ?2 limit.
const takeOverStale = `
SELECT operation_key FROM agent_operation_log
WHERE ` + isOpen + `
  AND ((status = 'unknown' AND (lease_until IS NULL OR lease_until < ?1))
    OR (status = 'started' AND lease_until < ?1))
ORDER BY updated_at
LIMIT ?2`

// takeOverKeys takes over the rows takeOverStale found, each with a new
// fencing token. A started row whose lease expired had its owner die
// mid-call: its effect is possible. ?1 a JSON array of keys, ?2 the
// transaction's time, ?3 TTL in milliseconds, ?4 owner.
const takeOverKeys = `
UPDATE agent_operation_log SET
    lease_owner     = ?4,
    lease_token     = lease_token + 1,
    lease_until     = ?2 + ?3,
    updated_at      = ?2,
    effect_possible = 1
WHERE operation_key IN (SELECT value FROM json_each(?1))
  AND +status IN ('started', 'unknown')
RETURNING ` + recordColumns + `, 1, ?2`

// resolveCheck reads what an operator's decision needs to know about a row
// inside the write transaction: its status, lease owner, and whether a live
// execute holds it (a started row whose lease runs and whose current
// attempt is an open execute). ?1 key, ?2 the transaction's time.
const resolveCheck = `
SELECT status, coalesce(lease_owner, ''),
       coalesce(status = 'started' AND lease_until >= ?2 AND (
           (first_attempt_inline AND first_finished_at IS NULL) OR EXISTS (
           SELECT 1 FROM agent_operation_attempts AS a
           WHERE a.operation_key = l.operation_key AND a.lease_token = l.lease_token
             AND a.kind = 'execute' AND a.finished_at IS NULL)), 0)
FROM agent_operation_log AS l WHERE operation_key = ?1`

// resolve records an operator's decision, with a new fencing token so that a
// late reconciler or worker cannot overwrite it. The caller checked the row
// with resolveCheck in the same transaction. ?1 key, ?2 status, ?3 object
// id, ?4 error code, ?5 operator, ?6 the transaction's time.
const resolve = `
UPDATE agent_operation_log SET
    status           = ?2,
    target_object_id = coalesce(nullif(?3, ''), target_object_id),
    error_code       = nullif(?4, ''),
    lease_owner      = ?5,
    lease_token      = lease_token + 1,
    lease_until      = NULL,
    reconcile_rounds = 0,
    updated_at       = ?6,
    completed_at     = ?6
WHERE operation_key = ?1
  AND status IN ('started', 'unknown', 'failed_retryable')
RETURNING attempt_count, lease_token`

// raiseForReview marks unknown operations raised for review, once. ?1 is a
// JSON array of keys; ?2 the transaction's time.
const raiseForReview = `
UPDATE agent_operation_log SET raised_at = ?2
WHERE operation_key IN (SELECT value FROM json_each(?1))
  AND status = 'unknown' AND raised_at IS NULL
RETURNING operation_key`

// resolveAttempt records the operator's decision in the trail. ?1 key, ?2
// attempt, ?3 token, ?4 operator, ?5 the transaction's time, ?6 status, ?7
// error code, ?8 evidence.
const resolveAttempt = `
INSERT INTO agent_operation_attempts
    (operation_key, attempt, lease_token, worker, kind, started_at, finished_at, outcome, error_code, note)
VALUES (?1, ?2, ?3, ?4, 'operator', ?5, ?5, ?6, nullif(?7, ''), ?8)`

// selectAttempts reads a key's trail: the first attempt its row holds, if it
// does, and the table's.
const selectAttempts = `
SELECT operation_key, attempt_count, lease_token, coalesce(lease_owner, ''), 'execute', created_at, first_finished_at,
       coalesce(first_outcome, ''), coalesce(first_error_code, ''), coalesce(first_request_id, ''), coalesce(first_note, '')
FROM agent_operation_log WHERE operation_key = ?1 AND first_attempt_inline
UNION ALL
SELECT operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
       coalesce(outcome, ''), coalesce(error_code, ''), coalesce(target_request_id, ''), coalesce(note, '')
FROM agent_operation_attempts WHERE operation_key = ?1
ORDER BY 6, 3`

const listUnresolved = `SELECT ` + recordColumns + liveNow + `
FROM agent_operation_log
WHERE ` + isOpen + ` AND status = 'unknown' AND reconcile_rounds >= ?1
ORDER BY created_at LIMIT ?2`

// listIdleRetryable: idle since the row was last touched or, when held,
// since its hold ended.
const listIdleRetryable = `SELECT ` + recordColumns + liveNow + `
FROM agent_operation_log
WHERE ` + isOpen + ` AND status = 'failed_retryable'
  AND max(updated_at, coalesce(lease_until, updated_at)) < ` + nowMS + ` - ?1
ORDER BY updated_at LIMIT ?2`

// purge deletes terminal rows in bounded chunks; never started,
// failed_retryable or unknown rows. Attempts go with them (ON DELETE
// CASCADE). ?1 completed before (ms), ?2 operation type (empty for all), ?3 chunk.
const purge = `
DELETE FROM agent_operation_log WHERE operation_key IN (
    SELECT operation_key FROM agent_operation_log
    WHERE status IN ('succeeded', 'failed_final')
      AND completed_at < ?1
      AND (?2 = '' OR operation_type = ?2)
    LIMIT ?3)`

// readSQL are the statements of the plain reads (sqljournal.Reader).
var readSQL = sqljournal.ReadSQL{
	Record: selectRecord,
	// FieldDigests reads the per-field digests of a key's first request.
	FieldDigests:      `SELECT coalesce(field_digests, '') FROM agent_operation_log WHERE operation_key = ?1`,
	Attempts:          selectAttempts,
	ListUnresolved:    listUnresolved,
	ListIdleRetryable: listIdleRetryable,
	// AttemptCounts counts the trail's attempts and the rows' own: a row
	// ended at its first attempt's end, found by the index of completed
	// rows, or is still open (the index of the open rows).
	AttemptCounts: `SELECT kind, outcome, count(*) FROM (
    SELECT kind, outcome FROM agent_operation_attempts WHERE finished_at IS NOT NULL AND finished_at >= ?1
    UNION ALL
    SELECT 'execute', first_outcome FROM agent_operation_log
    WHERE status IN ('succeeded', 'failed_final') AND completed_at >= ?1
      AND first_attempt_inline AND first_finished_at >= ?1
    UNION ALL
    SELECT 'execute', first_outcome FROM agent_operation_log
    WHERE ` + isOpen + ` AND first_attempt_inline AND first_finished_at >= ?1
) GROUP BY kind, outcome ORDER BY kind, outcome`,
	LeaseHolders: `SELECT lease_owner, count(*), max(lease_until) FROM agent_operation_log
WHERE ` + isOpen + ` AND status = 'started' AND lease_until >= ` + nowMS + ` AND lease_owner IS NOT NULL
GROUP BY lease_owner ORDER BY lease_owner`,
	// TraceIDs reads the recorded trace ids of a key's attempts.
	TraceIDs: `SELECT lease_token, first_trace_id FROM agent_operation_log
WHERE operation_key = ?1 AND first_attempt_inline AND first_trace_id IS NOT NULL
UNION ALL
SELECT lease_token, trace_id FROM agent_operation_attempts
WHERE operation_key = ?1 AND trace_id IS NOT NULL`,
	Searches: searches,
}
