package sqljournal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// ApprovalSQL are an engine's approval statements. Every statement that
// needs the clock takes it as a parameter (the database clock, read once
// per transaction), so that both engines run the same steps with the same
// parameters, in the order given.
type ApprovalSQL struct {
	// LogStatus reads a key's log row status: key.
	LogStatus string
	// Lock reads (and on PostgreSQL locks) an approval record
	// (ApprovalColumns): key.
	Lock string
	// Select reads an approval record without a lock: key.
	Select string
	// Votes reads a record's votes, oldest first: key.
	Votes string
	// Insert adds a pending record unless one exists: key, operation type,
	// request hash, target, event id, requested by, display, approvers,
	// now, expires at.
	Insert string
	// AddVote: key, approver, vote, reason, request hash, now, token id
	// (NULL for a person's vote).
	AddVote string
	// TokenUsedFor reads the key an issuer's token id approved: approver,
	// token id.
	TokenUsedFor string
	// SetState: key, state, now.
	SetState string
	// EndLog inserts the failed_final log row of a denial or expiry: key,
	// operation type, request hash, target, event id, error code, now.
	EndLog string
	// ListPending reads pending records, oldest first: limit.
	ListPending string
	// ListExpired reads the keys of pending records whose wait limit passed
	// before now: now, limit.
	ListExpired string
	// ListToRelease reads decided records not yet released, oldest
	// decision first: limit.
	ListToRelease string
	// MarkReleased: key, now.
	MarkReleased string
}

// ApprovalColumns is an approval record as every read scans it.
const ApprovalColumns = `operation_key, operation_type, request_hash, target_system, event_id, requested_by,
    display, approvers, state, requested_at, expires_at, decided_at, released_at`

// ApprovalTx runs journal's approval rules (journal.ApprovalRow) for one
// key in an engine's transaction.
type ApprovalTx[T any, P TimeColumn[T]] struct {
	Ctx  context.Context
	Key  string
	Now  time.Time
	SQL  *ApprovalSQL
	At   func(time.Time) any
	Q    Query
	Exec func(ctx context.Context, sql string, args ...any) error
}

// LogStatus implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) LogStatus() (st journal.Status, found bool, err error) {
	err = t.Q(t.Ctx, t.SQL.LogStatus, []any{t.Key}, func(rows Rows) error {
		if rows.Next() {
			found = true
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			st = journal.Status(s)
		}
		return rows.Err()
	})
	return st, found, err
}

// Lock implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) Lock() (journal.Approval, bool, error) {
	return readApproval[T, P](t.Ctx, t.Q, t.SQL, t.SQL.Lock, t.Key)
}

// Insert implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) Insert(r journal.ApprovalRequest) error {
	return t.Exec(t.Ctx, t.SQL.Insert, r.Key, r.OperationType, r.RequestHash, r.TargetSystem, r.EventID, r.RequestedBy,
		string(r.Display), r.Approvers, t.At(t.Now), t.At(t.Now.Add(r.TTL)))
}

// AddVote implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) AddVote(v journal.ApprovalVote) error {
	var token any
	if v.TokenID != "" {
		token = v.TokenID
	}
	return t.Exec(t.Ctx, t.SQL.AddVote, t.Key, v.Approver, string(v.Vote), v.Reason, v.RequestHash, t.At(t.Now), token)
}

// TokenUsedFor implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) TokenUsedFor(issuer, tokenID string) (key string, found bool, err error) {
	err = t.Q(t.Ctx, t.SQL.TokenUsedFor, []any{issuer, tokenID}, func(rows Rows) error {
		if rows.Next() {
			found = true
			if err := rows.Scan(&key); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return key, found, err
}

// MarkReleased implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) MarkReleased() error {
	return t.Exec(t.Ctx, t.SQL.MarkReleased, t.Key, t.At(t.Now))
}

// SetState implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) SetState(st journal.ApprovalState) error {
	return t.Exec(t.Ctx, t.SQL.SetState, t.Key, string(st), t.At(t.Now))
}

// EndLog implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) EndLog(a journal.Approval, code string) error {
	return t.Exec(t.Ctx, t.SQL.EndLog, a.Key, a.OperationType, a.RequestHash, a.TargetSystem, a.EventID, code, t.At(t.Now))
}

// Expired implements journal.ApprovalRow.
func (t *ApprovalTx[T, P]) Expired(a journal.Approval) bool { return !a.ExpiresAt.After(t.Now) }

// readApproval reads a record with stmt and its votes.
func readApproval[T any, P TimeColumn[T]](ctx context.Context, q Query, s *ApprovalSQL, stmt, key string) (journal.Approval, bool, error) {
	var a journal.Approval
	found := false
	err := q(ctx, stmt, []any{key}, func(rows Rows) error {
		if rows.Next() {
			found = true
			var err error
			if a, err = scanApproval[T, P](rows); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil || !found {
		return a, found, err
	}
	err = q(ctx, s.Votes, []any{key}, func(rows Rows) error {
		for rows.Next() {
			var v journal.ApprovalVote
			var vote string
			var at T
			if err := rows.Scan(&v.Approver, &vote, &v.Reason, &v.RequestHash, P(&at).Dest(), &v.TokenID); err != nil {
				return err
			}
			v.Vote, v.At = journal.Vote(vote), P(&at).Time()
			a.Votes = append(a.Votes, v)
		}
		return rows.Err()
	})
	return a, true, err
}

func scanApproval[T any, P TimeColumn[T]](row Row) (journal.Approval, error) {
	var a journal.Approval
	var display, state string
	var req, exp, dec, rel T
	if err := row.Scan(&a.Key, &a.OperationType, &a.RequestHash, &a.TargetSystem, &a.EventID, &a.RequestedBy,
		&display, &a.Approvers, &state, P(&req).Dest(), P(&exp).Dest(), P(&dec).Dest(), P(&rel).Dest()); err != nil {
		return a, err
	}
	a.Display, a.State = json.RawMessage(display), journal.ApprovalState(state)
	a.RequestedAt, a.ExpiresAt, a.DecidedAt, a.ReleasedAt = P(&req).Time(), P(&exp).Time(), P(&dec).Time(), P(&rel).Time()
	return a, nil
}

// RequestApproval runs journal.RequestApprovalIn in run's transaction.
func RequestApproval[T any, P TimeColumn[T]](r journal.ApprovalRequest, run func(fn func(tx *ApprovalTx[T, P]) error) error) (journal.Gate, journal.Approval, error) {
	if err := r.Validate(); err != nil {
		return "", journal.Approval{}, err
	}
	var (
		g journal.Gate
		a journal.Approval
	)
	err := run(func(tx *ApprovalTx[T, P]) (err error) {
		g, a, err = journal.RequestApprovalIn(tx, r)
		return err
	})
	if err != nil {
		return "", journal.Approval{}, fmt.Errorf("request approval %s: %w", r.Key, err)
	}
	return g, a, nil
}

// errRefusedToken carries a token decision's refusal out of the
// transaction, which it rolls back.
type errRefusedToken struct{ err error }

func (e errRefusedToken) Error() string { return e.err.Error() }

// ApproveByToken runs journal.ApproveByTokenIn in run's transaction; a
// refusal rolls it back and is returned as is.
func ApproveByToken[T any, P TimeColumn[T]](d journal.TokenDecision, run func(fn func(tx *ApprovalTx[T, P]) error) error) (journal.Gate, journal.Approval, error) {
	if err := d.Validate(); err != nil {
		return "", journal.Approval{}, err
	}
	var (
		g journal.Gate
		a journal.Approval
	)
	err := run(func(tx *ApprovalTx[T, P]) error {
		var refused, err error
		g, a, refused, err = journal.ApproveByTokenIn(tx, d)
		if err == nil && refused != nil {
			return errRefusedToken{refused}
		}
		return err
	})
	var rt errRefusedToken
	if errors.As(err, &rt) {
		return "", journal.Approval{}, rt.err
	}
	if err != nil {
		return "", journal.Approval{}, fmt.Errorf("approve by token %s: %w", d.Request.Key, err)
	}
	return g, a, nil
}

// DecideApproval runs journal.DecideApprovalIn in run's transaction (which
// masks the reason before it is stored).
func DecideApproval[T any, P TimeColumn[T]](d journal.ApprovalDecision, run func(fn func(tx *ApprovalTx[T, P]) error) error) (journal.Approval, error) {
	if err := d.Validate(); err != nil {
		return journal.Approval{}, err
	}
	var (
		a       journal.Approval
		refused error
	)
	err := run(func(tx *ApprovalTx[T, P]) (err error) {
		a, refused, err = journal.DecideApprovalIn(tx, d)
		return err
	})
	if err != nil {
		return journal.Approval{}, fmt.Errorf("decide approval %s: %w", d.Key, err)
	}
	return a, refused
}

// ExpireApproval runs journal.ExpireApprovalIn in run's transaction.
func ExpireApproval[T any, P TimeColumn[T]](run func(fn func(tx *ApprovalTx[T, P]) error) error) (bool, error) {
	var done bool
	err := run(func(tx *ApprovalTx[T, P]) (err error) {
		done, err = journal.ExpireApprovalIn(tx)
		return err
	})
	return done, err
}

// Approval reads one approval record with its votes.
func (r Reader[T, P]) Approval(ctx context.Context, s *ApprovalSQL, key string) (journal.Approval, error) {
	a, found, err := readApproval[T, P](ctx, r.query, s, s.Select, key)
	if err != nil {
		return a, fmt.Errorf("approval %s: %w", key, err)
	}
	if !found {
		return a, fmt.Errorf("approval %s: %w", key, journal.ErrNotFound)
	}
	return a, nil
}

// GetWithApproval is Get, or for a key without a log row whose approval is
// pending, journal.AwaitingRecord.
func (r Reader[T, P]) GetWithApproval(ctx context.Context, s *ApprovalSQL, key string) (journal.Record, error) {
	rec, err := r.Get(ctx, key)
	if !errors.Is(err, journal.ErrNotFound) {
		return rec, err
	}
	a, aerr := r.Approval(ctx, s, key)
	if aerr != nil || a.State != journal.ApprovalPending {
		return rec, err
	}
	return journal.AwaitingRecord(a), nil
}

// Approvals reads records (without votes) with stmt.
func (r Reader[T, P]) Approvals(ctx context.Context, stmt string, args ...any) ([]journal.Approval, error) {
	return all(ctx, r, scanApproval[T, P], stmt, args...)
}

// ExpiredKeys reads the keys of pending records past their wait limit at now.
func (r Reader[T, P]) ExpiredKeys(ctx context.Context, s *ApprovalSQL, now time.Time, limit int) ([]string, error) {
	return all(ctx, r, func(row Row) (k string, err error) { return k, row.Scan(&k) }, s.ListExpired, r.at(now), limit)
}
