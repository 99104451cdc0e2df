package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

var _ journal.ProcessStore = (*Store)(nil)

// processColumns is what every process read scans (scanProcess), with the
// database clock last.
const processColumns = `process_key, process_name, request_hash, definition_digest, status, step, failed_step, error_code,
    event_id, approval_id, coalesce(lease_owner, ''), lease_token, lease_until, created_at, updated_at, completed_at,
    resolved_by, resolved_at, resolution_evidence`

// processInsert records a new process, running at step 0 under a lease.
const processInsert = `
INSERT INTO process_log (process_key, process_name, request_hash, definition_digest, status, event_id, approval_id,
    lease_owner, lease_token, lease_until)
VALUES ($1, $2, $3, $4, 'running', $5, $6, $7, 1, now() + $8 * interval '1 millisecond')
ON CONFLICT (process_key) DO NOTHING
RETURNING ` + processColumns + `, now()`

// processTakeOver takes over a process whose coordinator is gone (its
// lease expired or was released), with a new token.
const processTakeOver = `
UPDATE process_log SET lease_owner = $3, lease_token = lease_token + 1,
    lease_until = now() + $4 * interval '1 millisecond', updated_at = now()
WHERE process_key = $1 AND request_hash = $2 AND status IN ('running', 'compensating')
  AND (lease_until IS NULL OR lease_until < now())
RETURNING ` + processColumns + `, now()`

const processSelect = `SELECT ` + processColumns + `, now() FROM process_log WHERE process_key = $1`

const processSelectForUpdate = processSelect + ` FOR UPDATE`

// processAdvance applies a checked progress; a process at rest ends its
// lease and records when it came to rest.
const processAdvance = `
UPDATE process_log SET status = $2, step = $3, failed_step = $4, error_code = $5, updated_at = now(),
    completed_at = CASE WHEN $2 IN ('succeeded', 'compensated', 'needs_review') THEN now() END,
    lease_until  = CASE WHEN $2 IN ('succeeded', 'compensated', 'needs_review') THEN NULL ELSE lease_until END
WHERE process_key = $1
RETURNING ` + processColumns + `, now()`

const processHeartbeat = `
UPDATE process_log SET lease_until = now() + $3 * interval '1 millisecond', updated_at = now()
WHERE process_key = $1 AND lease_token = $2 AND status IN ('running', 'compensating')`

const processRelease = `
UPDATE process_log SET lease_until = NULL, updated_at = now()
WHERE process_key = $1 AND lease_token = $2 AND status IN ('running', 'compensating')`

const processList = `SELECT ` + processColumns + `, now() FROM process_log
WHERE status = ANY($1::text[]) ORDER BY created_at, process_key LIMIT $2`

const processPurge = `
DELETE FROM process_log WHERE process_key IN (
    SELECT process_key FROM process_log
    WHERE status IN ('succeeded', 'compensated') AND completed_at < $1
    LIMIT $2
)`

// processResolve records an operator's settlement (checked by
// journal.CheckResolve under the row's lock) with a new token, so that a
// coordinator that somehow still held the old one is refused.
const processResolve = `
UPDATE process_log SET status = $2, resolved_by = $3, resolution_evidence = $4, resolved_at = now(),
    completed_at = now(), updated_at = now(), lease_token = lease_token + 1,
    lease_until = NULL
WHERE process_key = $1
RETURNING ` + processColumns + `, now()`

const definitionInsert = `
INSERT INTO process_definitions (definition_digest, process_name, body) VALUES ($1, $2, $3)
ON CONFLICT (definition_digest) DO NOTHING`

const definitionSelect = `SELECT definition_digest, process_name, body, created_at FROM process_definitions WHERE definition_digest = $1`

// scanProcess reads one row of processColumns and the clock.
func scanProcess(row pgx.Row) (journal.ProcessRecord, time.Time, error) {
	var (
		r                     journal.ProcessRecord
		status                string
		until, done, resolved pgTime
		created, updated, at  time.Time
	)
	err := row.Scan(&r.Key, &r.Name, &r.RequestHash, &r.Digest, &status, &r.Step, &r.FailedStep, &r.ErrorCode,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, until.Dest(), &created, &updated, done.Dest(),
		&r.ResolvedBy, resolved.Dest(), &r.ResolutionEvidence, &at)
	if err != nil {
		return journal.ProcessRecord{}, time.Time{}, err
	}
	r.Status = journal.ProcessStatus(status)
	r.LeaseUntil, r.CreatedAt, r.UpdatedAt, r.CompletedAt = until.Time(), created, updated, done.Time()
	r.ResolvedAt = resolved.Time()
	return r, at, nil
}

// ClaimProcess records a new process or decides on the recorded one.
func (s *Store) ClaimProcess(ctx context.Context, r journal.ProcessClaimRequest) (journal.ProcessClaim, error) {
	if err := r.Validate(); err != nil {
		return journal.ProcessClaim{}, err
	}
	ttl := r.LeaseTTL.Milliseconds()
	for round := 0; ; round++ {
		rec, now, err := scanProcess(s.db.QueryRow(ctx, processInsert, r.Key, r.Name, r.RequestHash, r.Digest, r.EventID, r.ApprovalID, r.Owner, ttl))
		if err == nil {
			return journal.ProcessClaim{Decision: journal.ProcessRun, Token: rec.LeaseToken, Record: rec, Now: now}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return journal.ProcessClaim{}, fmt.Errorf("claim process %s: %w", r.Key, err)
		}
		rec, now, err = scanProcess(s.db.QueryRow(ctx, processTakeOver, r.Key, r.RequestHash, r.Owner, ttl))
		if err == nil {
			return journal.ProcessClaim{Decision: journal.ProcessRun, Token: rec.LeaseToken, Resumed: true, Record: rec, Now: now}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return journal.ProcessClaim{}, fmt.Errorf("claim process %s: %w", r.Key, err)
		}
		rec, now, err = scanProcess(s.db.QueryRow(ctx, processSelect, r.Key))
		if errors.Is(err, pgx.ErrNoRows) && round < s.cfg.ClaimRounds {
			continue // deleted in between: insert again
		}
		if err != nil {
			return journal.ProcessClaim{}, fmt.Errorf("claim process %s: %w", r.Key, err)
		}
		d := journal.DecideProcess(r, rec, now)
		if d != journal.ProcessRun || round >= s.cfg.ClaimRounds {
			if d == journal.ProcessRun {
				d = journal.ProcessBusy // the lease keeps moving under us: come back later
			}
			return journal.ProcessClaim{Decision: d, Record: rec, Now: now}, nil
		}
		// The lease ended between the take-over and this read: try again.
	}
}

// AdvanceProcess applies p under its fencing token.
func (s *Store) AdvanceProcess(ctx context.Context, p journal.ProcessProgress) (journal.ProcessRecord, error) {
	if err := p.Validate(); err != nil {
		return journal.ProcessRecord{}, err
	}
	var out journal.ProcessRecord
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rec, _, err := scanProcess(tx.QueryRow(ctx, processSelectForUpdate, p.Key))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("advance process %s: %w", p.Key, journal.ErrNotFound)
		}
		if err != nil {
			return err
		}
		applied, err := journal.CheckAdvance(rec, p)
		if err != nil || applied {
			out = rec
			return err
		}
		out, _, err = scanProcess(tx.QueryRow(ctx, processAdvance, p.Key, string(p.Status), p.Step, p.FailedStep, p.ErrorCode))
		return err
	})
	if err != nil {
		if errors.Is(err, journal.ErrStaleToken) || errors.Is(err, journal.ErrIllegalTransition) || errors.Is(err, journal.ErrNotFound) {
			return out, err
		}
		// The commit may have applied: the row decides.
		if rec, gerr := s.GetProcess(ctx, p.Key); gerr == nil {
			if applied, cerr := journal.CheckAdvance(rec, p); applied && cerr == nil {
				return rec, nil
			}
		}
		return journal.ProcessRecord{}, fmt.Errorf("advance process %s: %w", p.Key, err)
	}
	return out, nil
}

// ResolveProcess records an operator's settlement of a needs_review
// process.
func (s *Store) ResolveProcess(ctx context.Context, r journal.ProcessResolution) (journal.ProcessRecord, error) {
	if err := r.Validate(); err != nil {
		return journal.ProcessRecord{}, err
	}
	r = r.Masked()
	var out journal.ProcessRecord
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rec, _, err := scanProcess(tx.QueryRow(ctx, processSelectForUpdate, r.Key))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("resolve process %s: %w", r.Key, journal.ErrNotFound)
		}
		if err != nil {
			return err
		}
		applied, err := journal.CheckResolve(rec, r)
		if err != nil || applied {
			out = rec
			return err
		}
		out, _, err = scanProcess(tx.QueryRow(ctx, processResolve, r.Key, string(r.Status), r.Operator, r.Evidence))
		return err
	})
	if err != nil {
		if errors.Is(err, journal.ErrIllegalTransition) || errors.Is(err, journal.ErrNotFound) {
			return out, err
		}
		// The commit may have applied: the row decides.
		if rec, gerr := s.GetProcess(ctx, r.Key); gerr == nil {
			if applied, cerr := journal.CheckResolve(rec, r); applied && cerr == nil {
				return rec, nil
			}
		}
		return journal.ProcessRecord{}, fmt.Errorf("resolve process %s: %w", r.Key, err)
	}
	return out, nil
}

// HeartbeatProcess extends the lease under token.
func (s *Store) HeartbeatProcess(ctx context.Context, key string, token int64, ttl time.Duration) error {
	return s.processLease(ctx, processHeartbeat, key, token, ttl.Milliseconds())
}

// ReleaseProcess ends the lease now under token.
func (s *Store) ReleaseProcess(ctx context.Context, key string, token int64) error {
	return s.processLease(ctx, processRelease, key, token)
}

func (s *Store) processLease(ctx context.Context, sql, key string, token int64, args ...any) error {
	tag, err := s.db.Exec(ctx, sql, append([]any{key, token}, args...)...)
	if err != nil {
		return fmt.Errorf("process lease %s: %w", key, err)
	}
	if tag.RowsAffected() == 1 {
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
	rec, _, err := scanProcess(s.db.QueryRow(ctx, processSelect, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return journal.ProcessRecord{}, fmt.Errorf("process %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return journal.ProcessRecord{}, fmt.Errorf("process %s: %w", key, err)
	}
	return rec, nil
}

// ListProcesses lists processes in the given statuses, oldest first.
func (s *Store) ListProcesses(ctx context.Context, statuses []journal.ProcessStatus, limit int) ([]journal.ProcessRecord, error) {
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	rows, err := s.db.Query(ctx, processList, names, limit)
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
	if _, err := s.db.Exec(ctx, definitionInsert, d.Digest, d.Name, string(d.Body)); err != nil {
		return fmt.Errorf("save process definition %s: %w", d.Name, err)
	}
	return nil
}

// Definition returns the definition kept under digest.
func (s *Store) Definition(ctx context.Context, digest string) (journal.ProcessDefinition, error) {
	var (
		d    journal.ProcessDefinition
		body string
	)
	err := s.db.QueryRow(ctx, definitionSelect, digest).Scan(&d.Digest, &d.Name, &body, &d.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("process definition %s: %w", digest, journal.ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("process definition %s: %w", digest, err)
	}
	d.Body = []byte(body)
	return d, nil
}

// PurgeProcesses deletes processes at rest (succeeded, compensated) since
// before, in chunks.
func (s *Store) PurgeProcesses(ctx context.Context, before time.Time) (int64, error) {
	return sqljournal.Purge(s.cfg.PurgeChunk, func() (int64, error) {
		tag, err := s.db.Exec(ctx, processPurge, before, s.cfg.PurgeChunk)
		return tag.RowsAffected(), err
	})
}
