package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// LookupStatus is what a lookup by key found.
type LookupStatus string

// Lookup statuses.
const (
	LookupFound         LookupStatus = "found"
	LookupNotFound      LookupStatus = "not_found"
	LookupIndeterminate LookupStatus = "indeterminate"
)

// Lookup is what a target holds for an operation's key.
type Lookup struct {
	Status LookupStatus
	// ObjectID is the object found: the one the operation keeps (the
	// oldest, when the target holds several for the key).
	ObjectID string
	// Duplicates are the further objects that hold the key.
	Duplicates []string
	// Final: the target reports the earlier attempt as a final failure
	// (Code says which).
	Final bool
	Code  string
	// Note is what the lookup said, in the words of the trail ("lookup
	// failed: http_503", "not found yet; the target's search settles …").
	Note string
}

// ErrNoLookup: no adapter here can look the operation's type up.
var ErrNoLookup = errors.New("no adapter on this replica looks this operation type up")

// Looker asks the target an operation's type is routed to what it holds
// for the operation's key, now: the lookup the reconciler makes, for an
// operator about to resolve it. It writes nothing to the journal. The
// daemon's looker goes through the adapters (worker.LookUp).
type Looker interface {
	LookUp(ctx context.Context, rec journal.Record) (Lookup, error)
}

// lookupWait bounds a console lookup beyond the adapter's own call timeout.
const lookupWait = time.Minute

// check is what a lookup says of an operator's decision.
type check struct {
	// Lookup is the lookup's answer (nil when none was made).
	Lookup *Lookup
	// Said: the lookup settled the question either way (found or not
	// found); otherwise the decision rests on the operator's evidence.
	Said bool
	// Contradicts: the target's answer disagrees with the decision; it is
	// published only when the operator overrides it.
	Contradicts bool
	// Message says so, for the page and, on an override, for the trail.
	Message string
	// Suggest is the object id the lookup found, for the form.
	Suggest string
}

// lookUp asks the looker about rec; a failure to ask is a check that
// says why nothing was checked.
func (c *Console) lookUp(ctx context.Context, rec journal.Record) (*Lookup, string) {
	if c.d.Looker == nil {
		return nil, "this console has no adapters to look the operation up"
	}
	ctx, cancel := context.WithTimeout(ctx, lookupWait)
	defer cancel()
	l, err := c.d.Looker.LookUp(ctx, rec)
	if err != nil {
		c.d.Log.Warn("console: lookup failed", "operation_key", rec.Key, "error", err.Error())
		return nil, "the lookup could not be made: " + err.Error()
	}
	return &l, ""
}

// checkDecision looks rec up and compares the answer with the decision:
// as (succeeded or failed_final) and, for succeeded, the object id typed.
func (c *Console) checkDecision(ctx context.Context, rec journal.Record, as journal.Status, object string) check {
	l, why := c.lookUp(ctx, rec)
	if l == nil {
		return check{Message: "Not checked: " + why + "."}
	}
	return compare(*l, as, object)
}

// compare judges a decision against a lookup's answer.
func compare(l Lookup, as journal.Status, object string) check {
	ch := check{Lookup: &l, Said: l.Status == LookupFound || l.Status == LookupNotFound}
	if l.Status == LookupFound && !l.Final {
		ch.Suggest = l.ObjectID
	}
	switch {
	case !ch.Said:
		ch.Message = fmt.Sprintf("Not checked: the target could not tell (%s); the decision rests on your evidence.", l.Note)
	case as == journal.StatusSucceeded && l.Status == LookupNotFound:
		ch.Contradicts = true
		ch.Message = fmt.Sprintf("The target holds no object for this key (%s), not %s.", l.Note, object)
	case as == journal.StatusSucceeded && l.Final:
		ch.Contradicts = true
		ch.Message = fmt.Sprintf("The target reports this key's attempt as a final failure (%s), not the object %s.", l.Code, object)
	case as == journal.StatusSucceeded && object == l.ObjectID:
		ch.Message = fmt.Sprintf("Checked: the target holds %s for this key.", object)
		if len(l.Duplicates) > 0 {
			ch.Message += fmt.Sprintf(" It also holds %d further object(s) for it (%v): they need a person.", len(l.Duplicates), l.Duplicates)
		}
	case as == journal.StatusSucceeded && slices.Contains(l.Duplicates, object):
		ch.Contradicts = true
		ch.Message = fmt.Sprintf("%s holds this key, but so does the older %s, which the operation keeps: resolve with %s.", object, l.ObjectID, l.ObjectID)
	case as == journal.StatusSucceeded:
		ch.Contradicts = true
		ch.Message = fmt.Sprintf("The target holds %s for this key, not %s.", l.ObjectID, object)
	case l.Status == LookupFound && !l.Final:
		ch.Contradicts = true
		ch.Message = fmt.Sprintf("The target holds %s for this key: the effect exists, so it did not fail.", l.ObjectID)
	case l.Status == LookupFound:
		ch.Message = fmt.Sprintf("Checked: the target reports this key's attempt as a final failure (%s).", l.Code)
	default:
		ch.Message = fmt.Sprintf("Checked: the target holds no object for this key (%s).", l.Note)
	}
	return ch
}

// describe says in one sentence what a lookup found, for the resolve page.
func (l Lookup) describe() string {
	switch {
	case l.Status == LookupFound && l.Final:
		return fmt.Sprintf("The target reports this key's attempt as a final failure (%s).", l.Code)
	case l.Status == LookupFound && len(l.Duplicates) > 0:
		return fmt.Sprintf("The target holds %s for this key, and %d further object(s) (%v): the operation keeps %s.",
			l.ObjectID, len(l.Duplicates), l.Duplicates, l.ObjectID)
	case l.Status == LookupFound:
		return fmt.Sprintf("The target holds %s for this key.", l.ObjectID)
	case l.Status == LookupNotFound:
		return fmt.Sprintf("The target holds no object for this key (%s).", l.Note)
	default:
		return fmt.Sprintf("The target could not tell: %s.", l.Note)
	}
}

// lookupRun is a run of identical lookups in an operation's trail: the same
// kind, outcome, error and note, one after another.
type lookupRun struct {
	First, Last journal.Attempt
	Count       int
}

// runsOf collapses consecutive identical attempts into runs, oldest first.
func runsOf(atts []journal.Attempt) []lookupRun {
	var runs []lookupRun
	for _, a := range atts {
		if n := len(runs); n > 0 {
			l := &runs[n-1].Last
			if l.Kind == a.Kind && l.Outcome == a.Outcome && l.ErrorCode == a.ErrorCode && l.Note == a.Note {
				runs[n-1].Last, runs[n-1].Count = a, runs[n-1].Count+1
				continue
			}
		}
		runs = append(runs, lookupRun{First: a, Last: a, Count: 1})
	}
	return runs
}

// Noun names the run's attempts in the plural.
func (r lookupRun) Noun() string {
	switch r.First.Kind {
	case journal.KindReconcile:
		return "lookups"
	case journal.KindOperator:
		return "operator decisions"
	default:
		return string(r.First.Kind) + " attempts"
	}
}
