// Package ctxsleep is the one sleep that a context cuts short, for the
// daemon's layers (the SQLite journal's busy wait, the consumer's pause
// after a failed fetch) and for its tools.
//
// Imports: the standard library only.
package ctxsleep

import (
	"context"
	"time"
)

// For waits d, or until ctx ends; it reports whether d ran out with ctx
// still live. A d of zero or less does not wait: it reports whether ctx is
// still live.
func For(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
