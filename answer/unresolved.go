package answer

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// Kind is a kind of unresolved operation: the label kind of the metric
// idemgate_operations_unresolved, and how every list of the unresolved
// names its parts.
type Kind string

// The two kinds of unresolved operation.
const (
	// KindUnknown: an unknown outcome after review_after lookups that
	// could not settle it; a person checks the target and resolves it.
	KindUnknown Kind = "unknown"
	// KindIdleRetry: a retryable failure untouched for idle_after; no
	// delivery is left to retry it, the agent must resend the command.
	KindIdleRetry Kind = "idle_retry"
)

// Kinds lists the kinds of unresolved operation.
func Kinds() []Kind { return []Kind{KindUnknown, KindIdleRetry} }

// Journal is what listing the unresolved reads of the journal.
type Journal interface {
	ListUnresolved(ctx context.Context, minRounds, limit int) ([]journal.Record, error)
	ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error)
}

// UnresolvedList is the unresolved operations of a journal, by kind,
// oldest first in each.
type UnresolvedList struct {
	// Unknown: unknown after review_after lookups (KindUnknown).
	Unknown []journal.Record
	// IdleRetry: failed_retryable idle for idle_after (KindIdleRetry).
	IdleRetry []journal.Record
}

// Of returns the list of one kind.
func (l UnresolvedList) Of(k Kind) []journal.Record {
	if k == KindIdleRetry {
		return l.IdleRetry
	}
	return l.Unknown
}

// All is both kinds, the unknown outcomes first.
func (l UnresolvedList) All() []journal.Record {
	return append(append(make([]journal.Record, 0, len(l.Unknown)+len(l.IdleRetry)), l.Unknown...), l.IdleRetry...)
}

// ListUnresolved lists what Unresolved calls unresolved, up to limit of
// each kind: the one list behind list_unresolved, `idemgate trace
// --unresolved`, the console's Unresolved pages and the metric
// idemgate_operations_unresolved. Zero thresholds take the defaults.
func (t Thresholds) ListUnresolved(ctx context.Context, j Journal, limit int) (UnresolvedList, error) {
	t = t.WithDefaults()
	var l UnresolvedList
	var err error
	if l.Unknown, err = j.ListUnresolved(ctx, t.ReviewAfter, limit); err != nil {
		return UnresolvedList{}, fmt.Errorf("list unresolved unknown outcomes: %w", err)
	}
	if l.IdleRetry, err = j.ListIdleRetryable(ctx, t.IdleAfter, limit); err != nil {
		return UnresolvedList{}, fmt.Errorf("list idle retries: %w", err)
	}
	return l, nil
}
