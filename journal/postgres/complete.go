package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// Complete applies a batch of outcomes in one statement. Items that did not
// apply are re-read once to tell a stale token, an illegal transition and an
// outcome already applied (by an earlier call whose commit seemed to fail).
func (s *Store) Complete(ctx context.Context, cs []journal.Completion) ([]error, error) {
	out := make([]error, len(cs))
	if len(cs) == 0 {
		return out, nil
	}
	for i := range cs {
		if err := cs[i].Validate(); err != nil {
			return nil, err
		}
	}
	// Sorted by key, so that concurrent batches lock rows in one order. The
	// sort is stable: a key twice in one batch is applied in order, one
	// statement per repeat.
	key := func(i int) string { return cs[i].Key }
	for rest := byKey(len(cs), key); len(rest) > 0; {
		group, later := firstOfEachKey(rest, key)
		if err := s.completeGroup(ctx, cs, group, out); err != nil {
			return nil, err
		}
		rest = later
	}
	return out, nil
}

// firstOfEachKey splits indexes sorted by key into the first of each key and
// the repeats, in order. Without repeats it returns sorted itself.
func firstOfEachKey(sorted []int, key func(int) string) (first, repeats []int) {
	for j := 1; j < len(sorted); j++ {
		if key(sorted[j]) != key(sorted[j-1]) {
			continue
		}
		first = append(make([]int, 0, len(sorted)), sorted[:j]...)
		for _, i := range sorted[j:] {
			if key(i) == key(first[len(first)-1]) {
				repeats = append(repeats, i)
			} else {
				first = append(first, i)
			}
		}
		return first, repeats
	}
	return sorted, nil
}

// completeGroup completes cs[group], whose keys are distinct and sorted.
func (s *Store) completeGroup(ctx context.Context, cs []journal.Completion, group []int, out []error) error {
	n := len(group)
	cols := make([]string, 7*n)
	keys, statuses, objects, codes := cols[:n:n], cols[n:2*n:2*n], cols[2*n:3*n:3*n], cols[3*n:4*n:4*n]
	reqIDs, notes, resultText := cols[4*n:5*n:5*n], cols[5*n:6*n:6*n], cols[6*n:]
	tokens := make([]int64, 2*n)
	tokens, holds := tokens[:n:n], tokens[n:]
	results := make([]*string, n)
	flags := make([]bool, 2*n)
	reconciled, applied := flags[:n:n], flags[n:]
	// The results share one string: one copy for the whole batch.
	size := 0
	for _, i := range group {
		size += len(cs[i].Result)
	}
	buf := make([]byte, 0, size)
	for _, i := range group {
		buf = append(buf, cs[i].Result...)
	}
	all, off := string(buf), 0
	for j, i := range group {
		c := &cs[i]
		keys[j], tokens[j], statuses[j], objects[j] = c.Key, c.Token, string(c.Status), c.TargetObjectID
		if len(c.Result) > 0 {
			resultText[j] = all[off : off+len(c.Result)]
			off += len(c.Result)
			results[j] = &resultText[j]
		}
		codes[j], reqIDs[j], notes[j], reconciled[j] = c.ErrorCode, c.TargetRequestID, c.Note, c.Reconciled
		holds[j] = c.HoldFor.Milliseconds()
	}
	var execErr error
	for try := 0; ; try++ {
		clear(applied)
		execErr = s.markKeys(ctx, keys, applied, complete, keys, tokens, statuses, objects, results, codes, reqIDs, notes, reconciled, holds)
		if execErr == nil || !retryable(execErr) || try >= s.cfg.Retries {
			break
		}
	}
	if execErr != nil && ctx.Err() != nil {
		return fmt.Errorf("complete: %w", execErr)
	}
	var check []string
	for j, ok := range applied {
		if !ok {
			check = append(check, keys[j])
		}
	}
	if len(check) == 0 {
		return nil
	}
	// Not applied, or the statement failed and may have applied: re-read.
	rowsOf := make([]journal.CompletionRow, n)
	rows, err := s.hot.Query(ctx, completeCheck, check)
	if err != nil {
		if execErr != nil {
			return fmt.Errorf("complete: %w (re-read: %v)", execErr, err)
		}
		return fmt.Errorf("complete re-read: %w", err)
	}
	for rows.Next() {
		var k, st string
		var tok int64
		if err := rows.Scan(&k, &st, &tok); err != nil {
			rows.Close()
			return fmt.Errorf("complete re-read: %w", err)
		}
		if j := position(keys, []byte(k)); j >= 0 {
			rowsOf[j] = journal.CompletionRow{Found: true, Status: journal.Status(st), Token: tok}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("complete re-read: %w", err)
	}
	var stale []int
	for j, i := range group {
		if applied[j] {
			continue
		}
		c, row := &cs[i], rowsOf[j]
		if execErr != nil && row.Open(c) {
			return fmt.Errorf("complete: %w", execErr)
		}
		out[i] = journal.NotApplied(c, row)
		if row.Found && row.Token != c.Token {
			stale = append(stale, i)
		}
	}
	if len(stale) > 0 {
		if err := s.fence(ctx, cs, stale); err != nil {
			return fmt.Errorf("complete: fenced attempts: %w", err)
		}
	}
	return nil
}

// fence closes the attempts of the completions cs[idx], refused for a stale
// token, as fenced.
func (s *Store) fence(ctx context.Context, cs []journal.Completion, idx []int) error {
	n := len(idx)
	cols := make([]string, 6*n)
	keys, statuses, objects, codes := cols[:n:n], cols[n:2*n:2*n], cols[2*n:3*n:3*n], cols[3*n:4*n:4*n]
	reqIDs, notes := cols[4*n:5*n:5*n], cols[5*n:]
	tokens := make([]int64, n)
	for j, i := range idx {
		c := &cs[i]
		keys[j], tokens[j], statuses[j], objects[j] = c.Key, c.Token, string(c.Status), c.TargetObjectID
		codes[j], reqIDs[j], notes[j] = c.ErrorCode, c.TargetRequestID, c.Note
	}
	_, err := s.hot.Exec(ctx, fenceAttempts, keys, tokens, statuses, objects, codes, reqIDs, notes)
	return err
}

// markKeys runs a statement returning one key per row and sets marks[j] for
// each returned keys[j]; keys are sorted.
func (s *Store) markKeys(ctx context.Context, keys []string, marks []bool, sql string, args ...any) error {
	rows, err := s.hot.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	return keyed(rows, keys, func(j int, _ pgx.Rows) error { marks[j] = true; return nil })
}

// Heartbeat extends the leases still held with these tokens.
func (s *Store) Heartbeat(ctx context.Context, refs []journal.LeaseRef, ttl time.Duration) ([]error, error) {
	if len(refs) == 0 {
		return []error{}, nil
	}
	if err := journal.ValidateHeartbeat(ttl); err != nil {
		return nil, err
	}
	keys := make([]string, len(refs))
	tokens := make([]int64, len(refs))
	for i, r := range refs {
		keys[i], tokens[i] = r.Key, r.Token
	}
	live := make(map[string]bool, len(refs))
	rows, err := s.hot.Query(ctx, heartbeat, keys, tokens, ttl.Milliseconds())
	if err == nil {
		err = sqljournal.MarkKeys(rows, live)
		rows.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return sqljournal.LeaseResults(refs, live), nil
}
