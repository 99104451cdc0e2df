package sqlite

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// approvalSQL are the approval statements (sqljournal.ApprovalSQL), with
// the same parameters as PostgreSQL's; times are milliseconds. A write
// transaction is the only writer, so Lock needs no lock of its own.
var approvalSQL = sqljournal.ApprovalSQL{
	LogStatus: `SELECT status FROM agent_operation_log WHERE operation_key = ?1`,
	Lock:      `SELECT ` + sqljournal.ApprovalColumns + ` FROM agent_operation_approvals WHERE operation_key = ?1`,
	Select:    `SELECT ` + sqljournal.ApprovalColumns + ` FROM agent_operation_approvals WHERE operation_key = ?1`,
	Votes: `SELECT approver, vote, reason, request_hash, decided_at, coalesce(token_id, '') FROM agent_operation_approval_votes
WHERE operation_key = ?1 ORDER BY decided_at, approver`,
	Insert: `INSERT INTO agent_operation_approvals (operation_key, operation_type, request_hash, target_system, event_id,
    requested_by, display, approvers, state, requested_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10)
ON CONFLICT (operation_key) DO NOTHING`,
	AddVote: `INSERT INTO agent_operation_approval_votes (operation_key, approver, vote, reason, request_hash, decided_at, token_id)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`,
	TokenUsedFor: `SELECT operation_key FROM agent_operation_approval_votes WHERE approver = ?1 AND token_id = ?2`,
	SetState:     `UPDATE agent_operation_approvals SET state = ?2, decided_at = ?3 WHERE operation_key = ?1 AND state = 'pending'`,
	EndLog: `INSERT INTO agent_operation_log (operation_key, operation_type, request_hash, status, target_system,
    error_code, attempt_count, event_id, created_at, updated_at, completed_at)
VALUES (?1, ?2, ?3, 'failed_final', ?4, ?6, 0, ?5, ?7, ?7, ?7)
ON CONFLICT (operation_key) DO NOTHING`,
	ListPending: `SELECT ` + sqljournal.ApprovalColumns + ` FROM agent_operation_approvals WHERE state = 'pending'
ORDER BY expires_at, operation_key LIMIT ?1`,
	ListExpired: `SELECT operation_key FROM agent_operation_approvals WHERE state = 'pending' AND expires_at <= ?1
ORDER BY expires_at, operation_key LIMIT ?2`,
	ListToRelease: `SELECT ` + sqljournal.ApprovalColumns + ` FROM agent_operation_approvals WHERE state <> 'pending' AND released_at IS NULL
ORDER BY decided_at, operation_key LIMIT ?1`,
	MarkReleased: `UPDATE agent_operation_approvals SET released_at = ?2 WHERE operation_key = ?1 AND released_at IS NULL`,
}

type approvalTx = sqljournal.ApprovalTx[msTime, *msTime]

// inApproval runs fn in one write transaction, with its clock.
func (s *Store) inApproval(ctx context.Context, key string) func(fn func(tx *approvalTx) error) error {
	return func(fn func(tx *approvalTx) error) error {
		return s.write(ctx, func(tx *writeTx) error {
			at := &approvalTx{Ctx: ctx, Key: key, Now: fromMS(tx.now), SQL: &approvalSQL, At: browseMS}
			at.Q = func(ctx context.Context, sql string, args []any, read func(sqljournal.Rows) error) error {
				rows, err := tx.QueryContext(ctx, sql, args...)
				if err != nil {
					return err
				}
				defer rows.Close()
				return read(rows)
			}
			at.Exec = func(ctx context.Context, sql string, args ...any) error {
				_, err := tx.ExecContext(ctx, sql, args...)
				return err
			}
			return fn(at)
		})
	}
}

// RequestApproval implements journal.Store.
func (s *Store) RequestApproval(ctx context.Context, r journal.ApprovalRequest) (journal.Gate, journal.Approval, error) {
	if err := checkTexts(r.Key, "key", r.Key, "requested by", r.RequestedBy, "event id", r.EventID); err != nil {
		return "", journal.Approval{}, err
	}
	return sqljournal.RequestApproval(r, s.inApproval(ctx, r.Key))
}

// ApproveByToken implements journal.Store.
func (s *Store) ApproveByToken(ctx context.Context, d journal.TokenDecision) (journal.Gate, journal.Approval, error) {
	if err := checkTexts(d.Request.Key, "key", d.Request.Key, "requested by", d.Request.RequestedBy, "event id", d.Request.EventID,
		"issuer", d.Issuer, "token id", d.TokenID); err != nil {
		return "", journal.Approval{}, err
	}
	return sqljournal.ApproveByToken(d, s.inApproval(ctx, d.Request.Key))
}

// DecideApproval implements journal.Store.
func (s *Store) DecideApproval(ctx context.Context, d journal.ApprovalDecision) (journal.Approval, error) {
	if err := checkTexts(d.Key, "key", d.Key, "approver", d.Approver, "reason", d.Reason); err != nil {
		return journal.Approval{}, err
	}
	return sqljournal.DecideApproval(d, s.inApproval(ctx, d.Key))
}

// Approval implements journal.Store.
func (s *Store) Approval(ctx context.Context, key string) (journal.Approval, error) {
	return s.Reader.Approval(ctx, &approvalSQL, key)
}

// Get returns one operation; a key whose approval is pending reads as
// awaiting_approval.
func (s *Store) Get(ctx context.Context, key string) (journal.Record, error) {
	return s.Reader.GetWithApproval(ctx, &approvalSQL, key)
}

// PendingApprovals implements journal.Store.
func (s *Store) PendingApprovals(ctx context.Context, limit int) ([]journal.Approval, error) {
	return s.Reader.Approvals(ctx, approvalSQL.ListPending, journal.ListLimit(limit))
}

// ApprovalsToRelease implements journal.Store.
func (s *Store) ApprovalsToRelease(ctx context.Context, limit int) ([]journal.Approval, error) {
	return s.Reader.Approvals(ctx, approvalSQL.ListToRelease, journal.ListLimit(limit))
}

// MarkReleased implements journal.Store.
func (s *Store) MarkReleased(ctx context.Context, key string) error {
	err := s.write(ctx, func(tx *writeTx) error {
		_, err := tx.ExecContext(ctx, approvalSQL.MarkReleased, key, tx.now)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark released %s: %w", key, err)
	}
	return nil
}

// ExpireApprovals implements journal.Store: one write transaction per key,
// each re-checking the record.
func (s *Store) ExpireApprovals(ctx context.Context, limit int) ([]string, error) {
	now, err := s.Now(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := s.Reader.ExpiredKeys(ctx, &approvalSQL, now, journal.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("expire approvals: %w", err)
	}
	var out []string
	for _, k := range keys {
		done, err := sqljournal.ExpireApproval(s.inApproval(ctx, k))
		if err != nil {
			return out, fmt.Errorf("expire approval %s: %w", k, err)
		}
		if done {
			out = append(out, k)
		}
	}
	return out, nil
}
