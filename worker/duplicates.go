package worker

import (
	"context"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/journal"
)

// withAttempt tells the adapter which attempt it runs and since when the
// journal knows the key, so that its searches start there (and a first
// attempt, or one after attempts a rate limit held back — fresh — skips
// searching for earlier ones).
func withAttempt(ctx context.Context, rec journal.Record, attempt int, fresh bool) context.Context {
	return adapters.WithAttempt(ctx, adapters.Attempt{Number: attempt, Since: rec.CreatedAt, Fresh: fresh})
}

// reportDuplicates raises what an adapter found: more than one object in
// the target for one key (a target without uniqueness raced, or a
// connector dropped the key and a retry created again). The operation
// keeps o.ObjectID; the others need an operator. The result already
// carries them (Outcome.Details); this counts and logs them, once.
func reportDuplicates(d Deps, a adapters.Adapter, key string, o adapters.Outcome) {
	if len(o.Duplicates) == 0 {
		return
	}
	d.Metrics.duplicates.WithLabelValues(a.Name()).Inc()
	d.Log.Error("the target holds several objects for one operation key; the operation keeps one, the others need an operator",
		"operation_key", key, "target_system", a.TargetSystem(), "adapter", a.Name(),
		"target_object_id", o.ObjectID, "duplicate_object_ids", o.Duplicates, "error_code", adapters.CodeDuplicateObjects)
}
