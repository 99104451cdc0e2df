package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

func validateCompletion(c journal.Completion) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return checkTexts(c.Key, "key", c.Key, "target object id", c.TargetObjectID, "error code", c.ErrorCode,
		"target request id", c.TargetRequestID, "note", c.Note)
}

// Complete applies a batch of outcomes in one write transaction. Items that
// did not apply are re-read in it to tell a stale token, an illegal
// transition and an outcome already applied (by an earlier call whose commit
// seemed to fail). If the transaction itself fails, its commit may still
// have applied: the items are re-read before anything is decided.
func (s *Store) Complete(ctx context.Context, cs []journal.Completion) ([]error, error) {
	out := make([]error, len(cs))
	if len(cs) == 0 {
		return out, nil
	}
	for _, c := range cs {
		if err := validateCompletion(c); err != nil {
			return nil, err
		}
	}
	// A key twice in one batch is applied in order, one statement per repeat.
	var groups [][]int
	for rest := indexes(len(cs)); len(rest) > 0; {
		var group, later []int
		seen := make(map[string]bool, len(rest))
		for _, i := range rest {
			if seen[cs[i].Key] {
				later = append(later, i)
				continue
			}
			seen[cs[i].Key] = true
			group = append(group, i)
		}
		groups = append(groups, group)
		rest = later
	}
	err := s.write(ctx, func(tx *writeTx) error {
		clear(out)
		for _, g := range groups {
			if err := completeGroup(ctx, tx, cs, g, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return out, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	return s.completeRecheck(ctx, cs, err)
}

func indexes(n int) []int {
	ix := make([]int, n)
	for i := range ix {
		ix[i] = i
	}
	return ix
}

func completionJSON(cs []journal.Completion, idx []int) string {
	j := newBatchJSON(len(idx), 192)
	for _, i := range idx {
		c := cs[i]
		j.begin()
		j.str(c.Key)
		j.int(c.Token)
		j.str(string(c.Status))
		j.str(c.TargetObjectID)
		if len(c.Result) > 0 {
			j.str(string(c.Result))
		} else {
			j.null()
		}
		j.str(c.ErrorCode)
		j.str(c.TargetRequestID)
		j.str(c.Note)
		if c.Reconciled {
			j.int(1)
		} else {
			j.int(0)
		}
		j.int(c.HoldFor.Milliseconds())
		j.end()
	}
	return j.String()
}

func completeGroup(ctx context.Context, tx *writeTx, cs []journal.Completion, group []int, out []error) error {
	applied := make(map[string]bool, len(group))
	if err := queryKeys(ctx, tx, applied, complete, completionJSON(cs, group), tx.now); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	var done, check []int
	for _, i := range group {
		if applied[cs[i].Key] {
			done = append(done, i)
		} else {
			check = append(check, i)
		}
	}
	if len(done) > 0 {
		if _, err := tx.ExecContext(ctx, completeAttempts, completionJSON(cs, done), tx.now); err != nil {
			return fmt.Errorf("complete attempts: %w", err)
		}
	}
	if len(check) == 0 {
		return nil
	}
	states, err := readStates(ctx, tx, cs, check)
	if err != nil {
		return fmt.Errorf("complete re-read: %w", err)
	}
	var stale []int
	for _, i := range check {
		out[i] = journal.NotApplied(&cs[i], states[cs[i].Key])
		if errors.Is(out[i], journal.ErrStaleToken) {
			stale = append(stale, i)
		}
	}
	if len(stale) > 0 {
		if _, err := tx.ExecContext(ctx, fenceAttempts, completionJSON(cs, stale), tx.now); err != nil {
			return fmt.Errorf("fenced attempts: %w", err)
		}
	}
	return nil
}

func readStates(ctx context.Context, q querier, cs []journal.Completion, idx []int) (map[string]journal.CompletionRow, error) {
	keys := newBatchJSON(len(idx), 48)
	for _, i := range idx {
		keys.key(cs[i].Key)
	}
	rows, err := q.QueryContext(ctx, completeCheck, keys.String())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	states := make(map[string]journal.CompletionRow, len(idx))
	for rows.Next() {
		var k, st string
		var tok int64
		if err := rows.Scan(&k, &st, &tok); err != nil {
			return nil, err
		}
		states[k] = journal.CompletionRow{Found: true, Status: journal.Status(st), Token: tok}
	}
	return states, rows.Err()
}

// completeRecheck decides a completion batch whose transaction failed: it
// may have committed. Items found applied are not errors; if any item could
// still apply, the whole call fails with the transaction's error (the caller
// completes again with the same token, which is safe).
func (s *Store) completeRecheck(ctx context.Context, cs []journal.Completion, execErr error) ([]error, error) {
	states, err := readStates(ctx, s.rd, cs, indexes(len(cs)))
	if err != nil {
		return nil, fmt.Errorf("complete: %w (re-read: %v)", execErr, err)
	}
	out := make([]error, len(cs))
	for i := range cs {
		c := &cs[i]
		row := states[c.Key]
		if row.Open(c) {
			return nil, fmt.Errorf("complete: %w", execErr)
		}
		out[i] = journal.NotApplied(c, row)
	}
	return out, nil
}

// Heartbeat extends the leases still held with these tokens, in one write
// transaction.
func (s *Store) Heartbeat(ctx context.Context, refs []journal.LeaseRef, ttl time.Duration) ([]error, error) {
	if len(refs) == 0 {
		return []error{}, nil
	}
	if err := journal.ValidateHeartbeat(ttl); err != nil {
		return nil, err
	}
	j := newBatchJSON(len(refs), 64)
	for _, r := range refs {
		if err := checkText(r.Key, "key", r.Key); err != nil {
			return nil, err
		}
		j.begin()
		j.str(r.Key)
		j.int(r.Token)
		j.end()
	}
	arg := j.String()
	live := make(map[string]bool, len(refs))
	err := s.write(ctx, func(tx *writeTx) error {
		clear(live)
		return queryKeys(ctx, tx, live, heartbeat, arg, tx.now, ttl.Milliseconds())
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return sqljournal.LeaseResults(refs, live), nil
}
