package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

var _ journal.ProcessStore = (*Store)(nil)

// processColumns is what every process read scans (scanProcess), with the
// clock last. Writes run in one write transaction whose clock (tx.now) is
// bound as ?now; reads select SQLite's clock.
const processColumns = `process_key, process_name, request_hash, definition_digest, status, step, failed_step, error_code,
    event_id, approval_id, coalesce(lease_owner, ''), lease_token, lease_until, created_at, updated_at, completed_at,
    resolved_by, resolved_at, resolution_evidence`

const processSelectAt = `SELECT ` + processColumns + `, ?2 FROM process_log WHERE process_key = ?1`

const processSelect = `SELECT ` + processColumns + `, ` + nowMS + ` FROM process_log WHERE process_key = ?1`

const processInsert = `
INSERT INTO process_log (process_key, process_name, request_hash, definition_digest, status, event_id, approval_id,
    lease_owner, lease_token, lease_until, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, 1, ?8 + ?9, ?8, ?8)
ON CONFLICT (process_key) DO NOTHING`

const processTakeOver = `
UPDATE process_log SET lease_owner = ?2, lease_token = lease_token + 1, lease_until = ?3 + ?4, updated_at = ?3
WHERE process_key = ?1 AND request_hash = ?5 AND status IN ('running', 'compensating')
  AND (lease_until IS NULL OR lease_until < ?3)`

const processAdvance = `
UPDATE process_log SET status = ?2, step = ?3, failed_step = ?4, error_code = ?5, updated_at = ?6,
    completed_at = CASE WHEN ?2 IN ('succeeded', 'compensated', 'needs_review') THEN ?6 END,
    lease_until  = CASE WHEN ?2 IN ('succeeded', 'compensated', 'needs_review') THEN NULL ELSE lease_until END
WHERE process_key = ?1`

const processHeartbeat = `
UPDATE process_log SET lease_until = ?3 + ?4, updated_at = ?3
WHERE process_key = ?1 AND lease_token = ?2 AND status IN ('running', 'compensating')`

const processRelease = `
UPDATE process_log SET lease_until = NULL, updated_at = ?3
WHERE process_key = ?1 AND lease_token = ?2 AND status IN ('running', 'compensating')`

const processList = `SELECT ` + processColumns + `, ` + nowMS + ` FROM process_log
WHERE status IN (SELECT value FROM json_each(?2)) ORDER BY created_at, process_key LIMIT ?1`

const processPurge = `
DELETE FROM process_log WHERE process_key IN (
    SELECT process_key FROM process_log
    WHERE status IN ('succeeded', 'compensated') AND completed_at < ?1
    LIMIT ?2
)`

// processResolve records an operator's settlement (checked by
// journal.CheckResolve in the same write transaction) with a new token.
const processResolve = `
UPDATE process_log SET status = ?2, resolved_by = ?3, resolution_evidence = ?4, resolved_at = ?5,
    completed_at = ?5, updated_at = ?5, lease_token = lease_token + 1,
    lease_until = NULL
WHERE process_key = ?1`

const definitionInsert = `
INSERT INTO process_definitions (definition_digest, process_name, body, created_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (definition_digest) DO NOTHING`

const definitionSelect = `SELECT definition_digest, process_name, body, created_at FROM process_definitions WHERE definition_digest = ?1`

type scanner interface{ Scan(dest ...any) error }

// scanProcess reads one row of processColumns and the clock.
func scanProcess(row scanner) (journal.ProcessRecord, time.Time, error) {
	var (
		r                     journal.ProcessRecord
		status                string
		until, done, resolved sql.NullInt64
		created               int64
		updated, at           int64
	)
	err := row.Scan(&r.Key, &r.Name, &r.RequestHash, &r.Digest, &status, &r.Step, &r.FailedStep, &r.ErrorCode,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, &until, &created, &updated, &done,
		&r.ResolvedBy, &resolved, &r.ResolutionEvidence, &at)
	if err != nil {
		return journal.ProcessRecord{}, time.Time{}, err
	}
	r.Status = journal.ProcessStatus(status)
	r.LeaseUntil, r.CreatedAt, r.UpdatedAt, r.CompletedAt = fromNullMS(until), fromMS(created), fromMS(updated), fromNullMS(done)
	r.ResolvedAt = fromNullMS(resolved)
	return r, fromMS(at), nil
}

// ClaimProcess records a new process or decides on the recorded one, in
// one write transaction: the decision and the take-over read one clock.
func (s *Store) ClaimProcess(ctx context.Context, r journal.ProcessClaimRequest) (journal.ProcessClaim, error) {
	if err := r.Validate(); err != nil {
		return journal.ProcessClaim{}, err
	}
	if err := checkTexts(r.Key, "key", r.Key, "name", r.Name, "event id", r.EventID, "approval id", r.ApprovalID, "owner", r.Owner); err != nil {
		return journal.ProcessClaim{}, err
	}
	var out journal.ProcessClaim
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, processInsert, r.Key, r.Name, r.RequestHash, r.Digest, r.EventID, r.ApprovalID, r.Owner,
			tx.now, r.LeaseTTL.Milliseconds())
		if err != nil {
			return err
		}
		inserted, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if inserted == 0 {
			res, err = tx.ExecContext(ctx, processTakeOver, r.Key, r.Owner, tx.now, r.LeaseTTL.Milliseconds(), r.RequestHash)
			if err != nil {
				return err
			}
			taken, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if taken == 1 {
				out.Decision, out.Resumed = journal.ProcessRun, true
			}
		} else {
			out.Decision = journal.ProcessRun
		}
		rec, now, err := scanProcess(tx.QueryRowContext(ctx, processSelectAt, r.Key, tx.now))
		if err != nil {
			return err
		}
		out.Record, out.Now = rec, now
		if out.Decision == journal.ProcessRun {
			out.Token = rec.LeaseToken
			return nil
		}
		out.Decision = journal.DecideProcess(r, rec, now)
		if out.Decision == journal.ProcessRun {
			out.Decision = journal.ProcessBusy // cannot happen in one transaction; never run without a token
		}
		return nil
	})
	if err != nil {
		return journal.ProcessClaim{}, fmt.Errorf("claim process %s: %w", r.Key, err)
	}
	return out, nil
}

// AdvanceProcess applies p under its fencing token.
func (s *Store) AdvanceProcess(ctx context.Context, p journal.ProcessProgress) (journal.ProcessRecord, error) {
	if err := p.Validate(); err != nil {
		return journal.ProcessRecord{}, err
	}
	if err := checkTexts(p.Key, "key", p.Key, "failed step", p.FailedStep, "error code", p.ErrorCode); err != nil {
		return journal.ProcessRecord{}, err
	}
	var out journal.ProcessRecord
	var decided error
	err := s.write(ctx, func(tx *writeTx) error {
		decided = nil
		rec, _, err := scanProcess(tx.QueryRowContext(ctx, processSelectAt, p.Key, tx.now))
		if errors.Is(err, sql.ErrNoRows) {
			decided = fmt.Errorf("advance process %s: %w", p.Key, journal.ErrNotFound)
			return nil
		}
		if err != nil {
			return err
		}
		out = rec
		applied, err := journal.CheckAdvance(rec, p)
		if err != nil || applied {
			decided = err
			return nil
		}
		if _, err := tx.ExecContext(ctx, processAdvance, p.Key, string(p.Status), p.Step, p.FailedStep, p.ErrorCode, tx.now); err != nil {
			return err
		}
		out, _, err = scanProcess(tx.QueryRowContext(ctx, processSelectAt, p.Key, tx.now))
		return err
	})
	if err != nil {
		// The commit may have applied: the row decides.
		if rec, gerr := s.GetProcess(ctx, p.Key); gerr == nil {
			if applied, cerr := journal.CheckAdvance(rec, p); applied && cerr == nil {
				return rec, nil
			}
		}
		return journal.ProcessRecord{}, fmt.Errorf("advance process %s: %w", p.Key, err)
	}
	return out, decided
}

// ResolveProcess records an operator's settlement of a needs_review
// process.
func (s *Store) ResolveProcess(ctx context.Context, r journal.ProcessResolution) (journal.ProcessRecord, error) {
	if err := r.Validate(); err != nil {
		return journal.ProcessRecord{}, err
	}
	r = r.Masked()
	if err := checkTexts(r.Key, "key", r.Key, "operator", r.Operator, "evidence", r.Evidence); err != nil {
		return journal.ProcessRecord{}, err
	}
	var out journal.ProcessRecord
	var decided error
	err := s.write(ctx, func(tx *writeTx) error {
		decided = nil
		rec, _, err := scanProcess(tx.QueryRowContext(ctx, processSelectAt, r.Key, tx.now))
		if errors.Is(err, sql.ErrNoRows) {
			decided = fmt.Errorf("resolve process %s: %w", r.Key, journal.ErrNotFound)
			return nil
		}
		if err != nil {
			return err
		}
		out = rec
		applied, err := journal.CheckResolve(rec, r)
		if err != nil || applied {
			decided = err
			return nil
		}
		if _, err := tx.ExecContext(ctx, processResolve, r.Key, string(r.Status), r.Operator, r.Evidence, tx.now); err != nil {
			return err
		}
		out, _, err = scanProcess(tx.QueryRowContext(ctx, processSelectAt, r.Key, tx.now))
		return err
	})
	if err != nil {
		// The commit may have applied: the row decides.
		if rec, gerr := s.GetProcess(ctx, r.Key); gerr == nil {
			if applied, cerr := journal.CheckResolve(rec, r); applied && cerr == nil {
				return rec, nil
			}
		}
		return journal.ProcessRecord{}, fmt.Errorf("resolve process %s: %w", r.Key, err)
	}
	return out, decided
}

// HeartbeatProcess extends the lease under token.
func (s *Store) HeartbeatProcess(ctx context.Context, key string, token int64, ttl time.Duration) error {
	return s.processLease(ctx, key, token, func(tx *writeTx) (sql.Result, error) {
		return tx.ExecContext(ctx, processHeartbeat, key, token, tx.now, ttl.Milliseconds())
	})
}

// ReleaseProcess ends the lease now under token.
func (s *Store) ReleaseProcess(ctx context.Context, key string, token int64) error {
	return s.processLease(ctx, key, token, func(tx *writeTx) (sql.Result, error) {
		return tx.ExecContext(ctx, processRelease, key, token, tx.now)
	})
}

func (s *Store) processLease(ctx context.Context, key string, token int64, exec func(tx *writeTx) (sql.Result, error)) error {
	var n int64
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := exec(tx)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("process lease %s: %w", key, err)
	}
	if n == 1 {
		return nil
	}
	rec, err := s.GetProcess(ctx, key)
	if err != nil {
		return err
	}
	return journal.CheckLease(rec, token)
}

// GetProcess returns one process.
func (s *Store) GetProcess(ctx context.Context, key string) (journal.ProcessRecord, error) {
	rec, _, err := scanProcess(s.rd.QueryRowContext(ctx, processSelect, key))
	if errors.Is(err, sql.ErrNoRows) {
		return journal.ProcessRecord{}, fmt.Errorf("process %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return journal.ProcessRecord{}, fmt.Errorf("process %s: %w", key, err)
	}
	return rec, nil
}

// ListProcesses lists processes in the given statuses, oldest first.
func (s *Store) ListProcesses(ctx context.Context, statuses []journal.ProcessStatus, limit int) ([]journal.ProcessRecord, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	names := make([]string, len(statuses))
	for i, st := range statuses {
		if !st.Valid() {
			return nil, fmt.Errorf("%w: process status %q", journal.ErrInvalid, st)
		}
		names[i] = string(st)
	}
	list, err := json.Marshal(names)
	if err != nil {
		return nil, err
	}
	rows, err := s.rd.QueryContext(ctx, processList, limit, string(list))
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer rows.Close()
	var out []journal.ProcessRecord
	for rows.Next() {
		rec, _, err := scanProcess(rows)
		if err != nil {
			return nil, fmt.Errorf("list processes: %w", err)
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// SaveDefinition keeps a definition under its digest.
func (s *Store) SaveDefinition(ctx context.Context, d journal.ProcessDefinition) error {
	if d.Digest == "" || d.Name == "" || len(d.Body) == 0 {
		return fmt.Errorf("%w: a process definition needs its digest, name and body", journal.ErrInvalid)
	}
	if err := checkTexts(d.Digest, "name", d.Name, "body", string(d.Body)); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *writeTx) error {
		_, err := tx.ExecContext(ctx, definitionInsert, d.Digest, d.Name, string(d.Body), tx.now)
		return err
	})
	if err != nil {
		return fmt.Errorf("save process definition %s: %w", d.Name, err)
	}
	return nil
}

// Definition returns the definition kept under digest.
func (s *Store) Definition(ctx context.Context, digest string) (journal.ProcessDefinition, error) {
	var (
		d       journal.ProcessDefinition
		body    string
		created int64
	)
	err := s.rd.QueryRowContext(ctx, definitionSelect, digest).Scan(&d.Digest, &d.Name, &body, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("process definition %s: %w", digest, journal.ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("process definition %s: %w", digest, err)
	}
	d.Body, d.CreatedAt = []byte(body), fromMS(created)
	return d, nil
}

// PurgeProcesses deletes processes at rest (succeeded, compensated) since
// before, a chunk per write transaction.
func (s *Store) PurgeProcesses(ctx context.Context, before time.Time) (int64, error) {
	return sqljournal.Purge(s.cfg.PurgeChunk, func() (int64, error) {
		var n int64
		err := s.write(ctx, func(tx *writeTx) error {
			res, err := tx.ExecContext(ctx, processPurge, before.UnixMilli(), s.cfg.PurgeChunk)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		return n, err
	})
}
