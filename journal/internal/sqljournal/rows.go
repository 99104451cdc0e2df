package sqljournal

import (
	"time"

	"github.com/idemgate/idemgate/journal"
)

// Row is one result row: pgx.Row and pgx.Rows, *sql.Row and *sql.Rows.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set: pgx.Rows and *sql.Rows. The caller closes it.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// TimeColumn is an engine's destination for a time column, T's pointer: Dest
// is what Scan fills, Time the time it read (zero for NULL).
type TimeColumn[T any] interface {
	*T
	Dest() any
	Time() time.Time
}

// RecordColumns is the journal row as every read scans it (ScanRecord), in
// this order.
const RecordColumns = `operation_key, operation_type, request_hash, status, target_system,
    coalesce(target_object_id, ''), response_json, coalesce(error_code, ''), attempt_count,
    event_id, approval_id, coalesce(lease_owner, ''), lease_token, lease_until,
    reconcile_rounds, created_at, updated_at, completed_at,
    reconcile_rounds_total, raised_at, effect_possible`

// Stored is a record as a claim's read finds it: whether its lease (or hold)
// is live, and the database clock that judged it. Its columns are
// RecordColumns, then lease_live and the clock.
type Stored struct {
	journal.Record
	LeaseLive bool
	Now       time.Time
}

// recordDest holds the destinations of one row: one allocation per row.
type recordDest[T any] struct {
	status                                  string
	result                                  []byte
	created, updated, lease, completed, now T
	raised                                  T
}

func scan[T any, P TimeColumn[T]](row Row, r *Stored, stored bool) error {
	d := &recordDest[T]{}
	dest := []any{&r.Key, &r.OperationType, &r.RequestHash, &d.status, &r.TargetSystem,
		&r.TargetObjectID, &d.result, &r.ErrorCode, &r.AttemptCount,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, P(&d.lease).Dest(),
		&r.ReconcileRounds, P(&d.created).Dest(), P(&d.updated).Dest(), P(&d.completed).Dest(),
		&r.ReconcileRoundsTotal, P(&d.raised).Dest(), &r.EffectPossible,
		&r.LeaseLive, P(&d.now).Dest()}
	if !stored {
		dest = dest[:len(dest)-2]
	}
	if err := row.Scan(dest...); err != nil {
		return err
	}
	r.Status = journal.Status(d.status)
	if len(d.result) > 0 {
		r.Result = d.result
	}
	r.CreatedAt, r.UpdatedAt = P(&d.created).Time(), P(&d.updated).Time()
	r.LeaseUntil, r.CompletedAt, r.RaisedAt = P(&d.lease).Time(), P(&d.completed).Time(), P(&d.raised).Time()
	r.Now = P(&d.now).Time()
	return nil
}

// ScanRecord reads a row of RecordColumns.
func ScanRecord[T any, P TimeColumn[T]](row Row) (journal.Record, error) {
	var r Stored
	err := scan[T, P](row, &r, false)
	return r.Record, err
}

// ScanStored reads a row of RecordColumns, lease_live and the clock.
func ScanStored[T any, P TimeColumn[T]](row Row) (Stored, error) {
	var r Stored
	err := scan[T, P](row, &r, true)
	return r, err
}

// StoredRecord reads a row of RecordColumns, lease_live and the clock, and
// keeps the record.
func StoredRecord[T any, P TimeColumn[T]](row Row) (journal.Record, error) {
	var r Stored
	err := scan[T, P](row, &r, true)
	return r.Record, err
}

// StoredByKey reads every row of rows with ScanStored, by key.
func StoredByKey[T any, P TimeColumn[T]](rows Rows) (map[string]Stored, error) {
	out := make(map[string]Stored)
	for rows.Next() {
		rec, err := ScanStored[T, P](rows)
		if err != nil {
			return nil, err
		}
		out[rec.Key] = rec
	}
	return out, rows.Err()
}

// Collect reads every row of rows with scan.
func Collect[R any](rows Rows, scan func(Row) (R, error)) ([]R, error) {
	var out []R
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// MarkKeys marks into the key of each row (rows of one text column).
func MarkKeys(rows Rows, into map[string]bool) error {
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return err
		}
		into[k] = true
	}
	return rows.Err()
}

// ScanAttempt reads a row of the attempts trail: operation_key, attempt,
// lease_token, worker, kind, started_at, finished_at, then outcome, error
// code, target request id and note as text.
func ScanAttempt[T any, P TimeColumn[T]](row Row) (journal.Attempt, error) {
	var (
		a                 journal.Attempt
		started, finished T
		outcome           string
	)
	err := row.Scan(&a.Key, &a.Attempt, &a.Token, &a.Worker, &a.Kind, P(&started).Dest(), P(&finished).Dest(),
		&outcome, &a.ErrorCode, &a.TargetRequestID, &a.Note)
	a.Outcome = journal.AttemptOutcome(outcome)
	a.StartedAt, a.FinishedAt = P(&started).Time(), P(&finished).Time()
	return a, err
}

// ScanStatusCount reads a row of status, operation type and count.
func ScanStatusCount(row Row) (journal.StatusCount, error) {
	var c journal.StatusCount
	var st string
	err := row.Scan(&st, &c.OperationType, &c.Count)
	c.Status = journal.Status(st)
	return c, err
}

// ScanAttemptCount reads a row of kind, outcome and count.
func ScanAttemptCount(row Row) (journal.AttemptCount, error) {
	var c journal.AttemptCount
	var o string
	err := row.Scan(&c.Kind, &o, &c.Count)
	c.Outcome = journal.AttemptOutcome(o)
	return c, err
}

// ScanLeaseHolder reads a row of owner, leases held and their latest end.
func ScanLeaseHolder[T any, P TimeColumn[T]](row Row) (journal.LeaseHolder, error) {
	var h journal.LeaseHolder
	var until T
	err := row.Scan(&h.Owner, &h.Leases, P(&until).Dest())
	h.Until = P(&until).Time()
	return h, err
}

// TraceIDs reads rows of lease token and trace id, by token.
func TraceIDs(rows Rows) (map[int64]string, error) {
	out := map[int64]string{}
	for rows.Next() {
		var token int64
		var id string
		if err := rows.Scan(&token, &id); err != nil {
			return nil, err
		}
		out[token] = id
	}
	return out, rows.Err()
}
