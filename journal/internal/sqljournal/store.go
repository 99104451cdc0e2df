package sqljournal

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/journal"
)

// Defaults both engines' configurations share.
const (
	// DefaultRetries bounds how often a batch the database rolled back (a
	// deadlock, a serialization failure, a busy file) is sent again.
	DefaultRetries = 5
	// DefaultPurgeChunk is how many rows one purge statement deletes.
	DefaultPurgeChunk = 5000
)

// WithDefaults fills a zero or negative retry count and purge chunk with
// their defaults.
func WithDefaults(retries, purgeChunk *int) {
	if *retries <= 0 {
		*retries = DefaultRetries
	}
	if *purgeChunk <= 0 {
		*purgeChunk = DefaultPurgeChunk
	}
}

// Purge deletes terminal rows chunk by chunk: del deletes one chunk and says
// how many rows it deleted; a chunk not full was the last. It returns how
// many rows went.
func Purge(chunk int, del func() (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := del()
		if err != nil {
			return total, fmt.Errorf("purge: %w", err)
		}
		total += n
		if n < int64(chunk) {
			return total, nil
		}
	}
}

// LeaseResults are a heartbeat's per-lease errors: journal.LeaseLost for
// each ref whose key the heartbeat did not extend (live).
func LeaseResults(refs []journal.LeaseRef, live map[string]bool) []error {
	out := make([]error, len(refs))
	for i, r := range refs {
		if !live[r.Key] {
			out[i] = journal.LeaseLost(r)
		}
	}
	return out
}

// ResolveRow is what an engine's check of a row reads for a resolution,
// inside the transaction that will write it: whether the row exists, its
// status, its lease owner, and whether a live execute holds it.
type ResolveRow struct {
	Found  bool
	Status journal.Status
	Owner  string
	Live   bool
}

// ApplyResolution is the step both engines take inside their transaction:
// check reads (and, where the engine can, locks) the row;
// journal.Resolution.Applies decides; apply writes the decision with the
// trail note it is given. It reports whether the decision was written.
func ApplyResolution(r journal.Resolution, check func() (ResolveRow, error), apply func(note string) error) (bool, error) {
	row, err := check()
	if err != nil || !row.Found || !r.Applies(row.Status, row.Live) {
		return false, err
	}
	if err := apply(r.TrailNote(row.Live, row.Owner)); err != nil {
		return false, err
	}
	return true, nil
}

// Resolved is the answer to an operator's resolution of key: the error of
// its transaction (txErr), else the row read after it with get, refused with
// journal.ResolveRefused when the resolution did not apply.
func Resolved(ctx context.Context, key string, txErr error, applied bool, get func(context.Context, string) (journal.Record, error)) (journal.Record, error) {
	if txErr != nil {
		return journal.Record{}, fmt.Errorf("resolve %s: %w", key, txErr)
	}
	rec, err := get(ctx, key)
	if err != nil {
		return journal.Record{}, err
	}
	if !applied {
		return rec, journal.ResolveRefused(rec)
	}
	return rec, nil
}
