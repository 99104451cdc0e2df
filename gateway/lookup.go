// Answers read from the journal: by key, by intent, the unresolved list,
// and the steps of an attempts trail.

package gateway

import (
	"context"
	"errors"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
)

// Lookup answers from the journal for an operation key; trail adds the
// attempts trail. Read only.
func (g *Gateway) Lookup(ctx context.Context, key string, trail bool) Answer {
	k, err := operation.ParseKey(key)
	if err != nil {
		reason := err.Error()
		var ke *operation.KeyError
		if errors.As(err, &ke) {
			reason = ke.Reason
		}
		return g.rules.Rejected("", "", string(operation.CodeBadKey), "operation_key: "+reason)
	}
	if _, ok := process.IsProcess(k.Operation); ok {
		return g.lookupProcess(ctx, key)
	}
	rec, err := g.store.Get(ctx, key)
	if errors.Is(err, journal.ErrNotFound) {
		if g.sent.has(key, g.now()) {
			return g.queued(key, k.Operation, "")
		}
		if g.Known(k.Operation) && !g.serves(k.Operation) {
			a := g.notRouted(k.Operation, k.IntentID)
			a.Status, a.OperationKey = StatusNotFound, key
			return a
		}
		return g.rules.NotFound(key, k.Operation)
	}
	if err != nil {
		g.log.Warn("gateway: journal read failed", "operation_key", key, "error", err.Error())
		return g.rules.Unavailable(key, k.Operation, "read the journal")
	}
	a := g.rules.FromRecord(rec, g.now())
	if rec.Status == journal.StatusAwaitingApproval {
		a.Approval = g.approvalWait(ctx, key)
	}
	if trail {
		atts, err := g.store.Attempts(ctx, key)
		if err != nil {
			g.log.Warn("gateway: attempts read failed", "operation_key", key, "error", err.Error())
		}
		a.Trail = steps(atts)
	}
	return a
}

// KeyFor derives the operation key of an intent, as the daemon does.
func (g *Gateway) KeyFor(opType, intentID string) (string, error) {
	if g.knownProcess(opType) {
		k := operation.Key{Env: g.cfg.Env, Operation: opType, IntentID: intentID, Version: operation.DefaultKeyVersion}
		if err := operation.ValidateKey(k.String()); err != nil {
			return "", &operation.DecodeError{Code: operation.CodeBadKey, Field: "intent_id", Msg: err.Error(), Err: err}
		}
		return k.String(), nil
	}
	k, err := operation.DeriveKey(g.cfg.Env, operation.Command{EventID: intentID, Operation: opType, IntentID: intentID}, g.reg)
	if err != nil {
		return "", err
	}
	return k.String(), nil
}

// LookupIntent answers from the journal for an operation type and intent id.
func (g *Gateway) LookupIntent(ctx context.Context, opType, intentID string, trail bool) Answer {
	key, err := g.KeyFor(opType, intentID)
	if err != nil {
		var de *operation.DecodeError
		if errors.As(err, &de) {
			return g.rules.Rejected("", opType, string(de.Code), decodeReason(de))
		}
		return g.rules.Rejected("", opType, string(operation.CodeBadKey), err.Error())
	}
	return g.Lookup(ctx, key, trail)
}

// Unresolved lists what a person or the agent must act on, as
// answer.Thresholds.ListUnresolved lists it: unknown operations
// review_after lookups could not settle (human_review) and retryable
// failures idle for idle_after (retry_same_intent), up to limit of each.
func (g *Gateway) Unresolved(ctx context.Context, limit int) ([]Answer, error) {
	if limit <= 0 {
		limit = 100
	}
	l, err := g.rules.ListUnresolved(ctx, g.store, limit)
	if err != nil {
		return nil, err
	}
	now := g.now()
	all := l.All()
	out := make([]Answer, 0, len(all))
	for _, rec := range all {
		out = append(out, g.rules.FromRecord(rec, now))
	}
	return out, nil
}

// maxSteps bounds the trail in an answer: the newest are kept.
const maxSteps = 20

func steps(atts []journal.Attempt) []Step {
	if len(atts) > maxSteps {
		atts = atts[len(atts)-maxSteps:]
	}
	out := make([]Step, 0, len(atts))
	for _, a := range atts {
		out = append(out, Step{Attempt: a.Attempt, Kind: string(a.Kind), Outcome: string(a.Outcome), ErrorCode: a.ErrorCode,
			Note: a.Note, StartedAt: a.StartedAt.UTC(), FinishedAt: a.FinishedAt.UTC()})
	}
	return out
}
