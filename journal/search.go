package journal

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/operation"
)

// Browser is the read side an operator's console needs, beside Store: a
// search over the journal paginated by keyset, and the counts of an
// overview. Both engines implement it; every query is read-only and served
// by an index (migration 0004_console), so that a page stays cheap on a
// journal of millions of rows.
type Browser interface {
	// Search returns up to q.Limit operations matching q, newest first
	// (created_at, then key, both descending), after q.After when set.
	Search(ctx context.Context, q SearchQuery) ([]Record, error)
	// StatusCounts counts operations by status and operation type.
	StatusCounts(ctx context.Context) ([]StatusCount, error)
	// AttemptCounts counts the attempts that finished at or after since, by
	// kind and outcome: what the journal knows of recent activity.
	AttemptCounts(ctx context.Context, since time.Time) ([]AttemptCount, error)
	// LeaseHolders lists the workers holding a live lease on a started
	// operation (database clock), with how many each holds.
	LeaseHolders(ctx context.Context) ([]LeaseHolder, error)
}

// SearchQuery selects operations. Empty fields do not filter. Key,
// EventID and TargetObjectID match exactly; IntentID matches the keys
// Env:<type>:IntentID:v<N> for each of Types (or OperationType alone).
type SearchQuery struct {
	Key            string
	EventID        string
	TargetObjectID string
	IntentID       string
	// Env and Types turn IntentID into key ranges; required with IntentID.
	Env   string
	Types []string
	// Status and OperationType filter exactly.
	Status        Status
	OperationType string
	// From (inclusive) and To (exclusive) bound created_at.
	From, To time.Time
	// After continues a previous page: the last row it showed.
	After *Cursor
	// Limit is the page size, 1..MaxSearchLimit.
	Limit int
}

// MaxSearchLimit bounds a search page.
const MaxSearchLimit = 500

// Cursor is the keyset position of a row in a search: its creation time
// and key.
type Cursor struct {
	CreatedAt time.Time
	Key       string
}

// CursorOf is the position of rec.
func CursorOf(rec Record) Cursor { return Cursor{CreatedAt: rec.CreatedAt, Key: rec.Key} }

// Validate checks a search before it reaches the database.
func (q SearchQuery) Validate() error {
	switch {
	case q.Limit < 1 || q.Limit > MaxSearchLimit:
		return fmt.Errorf("%w: search page size %d: 1..%d", ErrInvalid, q.Limit, MaxSearchLimit)
	case q.Status != "" && !q.Status.Valid():
		return fmt.Errorf("%w: search status %q: started, succeeded, failed_retryable, failed_final or unknown", ErrInvalid, q.Status)
	case q.IntentID != "" && q.Env == "":
		return fmt.Errorf("%w: search by intent id needs the env", ErrInvalid)
	case q.IntentID != "" && q.OperationType == "" && len(q.Types) == 0:
		return fmt.Errorf("%w: search by intent id needs the operation types", ErrInvalid)
	case !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To):
		return fmt.Errorf("%w: search time range: from %s is not before to %s", ErrInvalid,
			q.From.UTC().Format(time.RFC3339), q.To.UTC().Format(time.RFC3339))
	case q.After != nil && q.After.Key == "":
		return fmt.Errorf("%w: search cursor without a key", ErrInvalid)
	}
	return nil
}

// IntentRange is one half-open key range [Lo, Hi) holding the keys of an
// intent for one operation type: Env:Type:IntentID:v… (the key's
// operation.Key.VersionPrefix). Keys compare bytewise (PostgreSQL:
// COLLATE "C").
type IntentRange struct{ Lo, Hi string }

// IntentRanges are the key ranges of q's intent, one per operation type.
// The version that follows ("v" and digits) is checked by the query.
func (q SearchQuery) IntentRanges() []IntentRange {
	types := q.Types
	if q.OperationType != "" {
		types = []string{q.OperationType}
	}
	out := make([]IntentRange, 0, len(types))
	for _, t := range types {
		p := operation.Key{Env: q.Env, Operation: t, IntentID: q.IntentID}.VersionPrefix()
		out = append(out, IntentRange{Lo: p, Hi: strings.TrimSuffix(p, "v") + "w"})
	}
	return out
}

// StatusCount is how many operations of a type have a status.
type StatusCount struct {
	Status        Status
	OperationType string
	Count         int64
}

// AttemptCount is how many attempts of a kind ended with an outcome.
type AttemptCount struct {
	Kind    AttemptKind
	Outcome AttemptOutcome
	Count   int64
}

// LeaseHolder is a worker holding live leases.
type LeaseHolder struct {
	Owner  string
	Leases int64
	// Until is the latest end of its leases.
	Until time.Time
}
