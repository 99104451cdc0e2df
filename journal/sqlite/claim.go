package sqlite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/idemgate/idemgate/journal"
)

func validateClaim(r journal.ClaimRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	return checkTexts(r.Key, "key", r.Key, "operation type", r.OperationType, "request hash", r.RequestHash,
		"target system", r.TargetSystem, "event id", r.EventID, "approval id", r.ApprovalID, "owner", r.Owner)
}

// Claim decides every request of the batch. A plain read on the reader pool
// decides replays, conflicts and live leases without touching the writer;
// the other keys are decided and claimed in one write transaction.
func (s *Store) Claim(ctx context.Context, reqs []journal.ClaimRequest) ([]journal.Claim, error) {
	out := make([]journal.Claim, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	for _, r := range reqs {
		if err := validateClaim(r); err != nil {
			return nil, err
		}
	}
	// One decision per key: later duplicates of a key in the batch follow
	// journal.Repeat.
	first := make(map[string]int, len(reqs))
	pending := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if _, dup := first[r.Key]; dup {
			continue
		}
		first[r.Key] = i
		pending = append(pending, i)
	}

	recs, err := readRecords(ctx, s.rd, selectRecords, keysJSON(reqs, pending))
	if err != nil {
		return nil, fmt.Errorf("claim read: %w", err)
	}
	var writes []int
	for _, i := range pending {
		if rec, ok := recs[reqs[i].Key]; ok {
			if d, settled := journal.DecideExisting(&reqs[i], &rec.Record, rec.LeaseLive); settled {
				out[i] = journal.Claim{Decision: d, Record: rec.Record, Now: rec.Now}
				continue
			}
		}
		writes = append(writes, i)
	}
	if len(writes) > 0 {
		err := s.write(ctx, func(tx *writeTx) error {
			return claimTx(ctx, tx, reqs, writes, out)
		})
		if err != nil {
			return nil, journal.ClaimFailed(err)
		}
	}

	for i, r := range reqs {
		if j := first[r.Key]; j != i {
			out[i] = journal.Repeat(r, out[j])
		}
	}
	return out, nil
}

// claimTx decides and claims the requests idx inside a write transaction: it
// reads their rows, inserts the absent keys, re-claims retryable failures and
// takes over unknown outcomes and expired leases, and opens an attempt for
// every lease taken: in the row for a new key, in the trail otherwise.
// Nothing else writes meanwhile, so what it read holds.
func claimTx(ctx context.Context, tx *writeTx, reqs []journal.ClaimRequest, idx []int, out []journal.Claim) error {
	recs, err := readRecords(ctx, tx, selectRecordsAt, keysJSON(reqs, idx), tx.now)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	var fresh, retry, takeOver []int
	for _, i := range idx {
		rec, ok := recs[reqs[i].Key]
		if !ok {
			fresh = append(fresh, i)
			continue
		}
		d, settled := journal.DecideExisting(&reqs[i], &rec.Record, rec.LeaseLive)
		switch {
		case settled:
			out[i] = journal.Claim{Decision: d, Record: rec.Record, Now: rec.Now}
		case journal.TakeOver(rec.Status) == journal.Execute:
			retry = append(retry, i)
		default:
			takeOver = append(takeOver, i)
		}
	}

	// The rows a retry or take-over starts another attempt on write the
	// first attempt they hold into the trail first.
	var taken string // the keys of retry and takeOver, a JSON array
	if len(retry)+len(takeOver) > 0 {
		taken = keysJSON(reqs, append(slices.Clip(retry), takeOver...))
		if err := moveFirst(ctx, tx, taken); err != nil {
			return err
		}
	}
	attempts := newBatchJSON(len(retry)+len(takeOver), 64)
	steps := []struct {
		name     string
		sql      string
		idx      []int
		args     func([]journal.ClaimRequest, []int) string
		decision journal.Decision
	}{
		{"insert", claimInsert, fresh, claimJSON, journal.Execute},
		{"retry", claimRetry, retry, leaseJSON, journal.TakeOver(journal.StatusFailedRetryable)},
		{"take-over", claimTakeOver, takeOver, leaseJSON, journal.Reconcile},
	}
	for _, st := range steps {
		if len(st.idx) == 0 {
			continue
		}
		got, err := readRecords(ctx, tx, st.sql, st.args(reqs, st.idx), tx.now)
		if err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		for _, i := range st.idx {
			rec, ok := got[reqs[i].Key]
			if !ok {
				// Impossible while this transaction holds the write lock:
				// fail the batch rather than guess.
				return fmt.Errorf("%s %s: the row changed under the write lock", st.name, reqs[i].Key)
			}
			out[i] = journal.Claim{Decision: st.decision, Token: rec.LeaseToken, Attempt: rec.AttemptCount, Record: rec.Record, Now: rec.Now}
			if st.sql != claimInsert { // a new row holds its first attempt
				attempts.item(rec.Key, string(st.decision.AttemptKind()))
			}
		}
	}
	if taken == "" {
		return nil // new keys only: each row holds its first attempt
	}
	if _, err := tx.ExecContext(ctx, insertAttempts, attempts.String()); err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	if _, err := tx.ExecContext(ctx, abandonAttempts, taken, tx.now); err != nil {
		return fmt.Errorf("abandoned attempts: %w", err)
	}
	return nil
}

// moveFirst writes the first attempts that the rows of keys (a JSON array)
// still hold into the trail and clears the rows' copies: before a statement
// starts another attempt on them.
func moveFirst(ctx context.Context, tx *writeTx, keys string) error {
	if _, err := tx.ExecContext(ctx, moveFirstAttempts, keys, tx.now); err != nil {
		return fmt.Errorf("first attempts: %w", err)
	}
	if _, err := tx.ExecContext(ctx, clearFirstAttempts, keys); err != nil {
		return fmt.Errorf("first attempts: %w", err)
	}
	return nil
}

func keysJSON(reqs []journal.ClaimRequest, idx []int) string {
	j := newBatchJSON(len(idx), 48)
	for _, i := range idx {
		j.key(reqs[i].Key)
	}
	return j.String()
}

// claimItems is the batch parameter of reqs[idx], one array item each, its
// fields written by fields; width is an item's expected size.
func claimItems(reqs []journal.ClaimRequest, idx []int, width int, fields func(j *batchJSON, r *journal.ClaimRequest)) string {
	j := newBatchJSON(len(idx), width)
	for _, i := range idx {
		j.begin()
		fields(j, &reqs[i])
		j.end()
	}
	return j.String()
}

// claimJSON is claimInsert's parameter.
func claimJSON(reqs []journal.ClaimRequest, idx []int) string {
	return claimItems(reqs, idx, 256, func(j *batchJSON, r *journal.ClaimRequest) {
		j.strs(r.Key, r.OperationType, r.RequestHash, r.TargetSystem, r.EventID, r.ApprovalID, r.Owner)
		j.int(r.LeaseTTL.Milliseconds())
		j.str(r.FieldDigests)
	})
}

// leaseJSON is claimRetry's and claimTakeOver's parameter.
func leaseJSON(reqs []journal.ClaimRequest, idx []int) string {
	return claimItems(reqs, idx, 160, func(j *batchJSON, r *journal.ClaimRequest) {
		j.strs(r.Key, r.RequestHash, r.Owner)
		j.int(r.LeaseTTL.Milliseconds())
	})
}

// TakeOverStale takes over unknown outcomes and expired leases for the
// reconciler. There is no SKIP LOCKED in SQLite: callers are serialised by
// the one writer, and each row is taken by a conditional UPDATE … RETURNING,
// so no row is handed to two callers.
func (s *Store) TakeOverStale(ctx context.Context, owner string, ttl time.Duration, limit int) ([]journal.Claim, error) {
	if err := journal.ValidateTakeOver(owner, ttl, limit); err != nil {
		return nil, err
	}
	if err := checkText("take-over", "owner", owner); err != nil {
		return nil, err
	}
	var out []journal.Claim
	err := s.write(ctx, func(tx *writeTx) error {
		out = out[:0]
		stale := make(map[string]bool)
		if err := queryKeys(ctx, tx, stale, takeOverStale, tx.now, limit); err != nil {
			return err
		}
		if len(stale) == 0 {
			return nil
		}
		found := newBatchJSON(len(stale), 48)
		for k := range stale {
			found.key(k)
		}
		if err := moveFirst(ctx, tx, found.String()); err != nil {
			return err
		}
		got, err := readRecords(ctx, tx, takeOverKeys, found.String(), tx.now, ttl.Milliseconds(), owner)
		if err != nil {
			return err
		}
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		attempts := newBatchJSON(len(keys), 64)
		taken := newBatchJSON(len(keys), 48)
		for _, k := range keys {
			rec := got[k]
			out = append(out, journal.Claim{Decision: journal.Reconcile, Token: rec.LeaseToken, Attempt: rec.AttemptCount, Record: rec.Record, Now: rec.Now})
			attempts.item(k, string(journal.KindReconcile))
			taken.key(k)
		}
		if _, err = tx.ExecContext(ctx, insertAttempts, attempts.String()); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, abandonAttempts, taken.String(), tx.now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("take over stale: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
