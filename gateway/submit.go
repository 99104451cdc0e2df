// Submit: a request built into a command, validated, published, and the
// wait for its outcome (the result, the journal, or pending past the bound).

package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/producer"
)

// Request is one call of an operation.
type Request struct {
	// Operation is the registered operation type, e.g. "payment.charge".
	Operation string
	// IntentID names the business intent: one per intent, reused on every
	// retry, never one per attempt.
	IntentID string
	// ApprovalID approves a money-moving operation; stored, not fingerprinted.
	ApprovalID string
	// ApprovalToken is a pre-signed approval token (a compact JWS from the
	// business's own system) the daemon verifies before anything executes;
	// carried in the command, never stored or logged.
	ApprovalToken string
	// Payload holds the operation's fields, a JSON object.
	Payload json.RawMessage
	// Wait bounds the wait for the outcome; 0 means Config.Wait. Capped at
	// Config.MaxWait.
	Wait time.Duration
}

// Submit publishes the command for req and waits, up to the bound, for its
// outcome. It always answers: failures to hand the command over are an
// unavailable answer, never an error.
func (g *Gateway) Submit(ctx context.Context, req Request) Answer {
	if req.IntentID == "" {
		return g.rules.Rejected("", req.Operation, string(operation.CodeMissingField),
			"intent_id: required: one intent_id per business intent, reused on every retry")
	}
	if _, ok := process.IsProcess(req.Operation); ok {
		return g.submitProcess(ctx, req)
	}
	if g.Known(req.Operation) && !g.serves(req.Operation) {
		g.log.Warn("gateway: a call of an operation no adapter serves here was refused (see routes: in the config)", "operation", req.Operation)
		return g.notRouted(req.Operation, req.IntentID)
	}
	cmd := operation.Command{EventID: req.IntentID, Operation: req.Operation, IntentID: req.IntentID,
		ApprovalID: req.ApprovalID, ApprovalToken: req.ApprovalToken, Payload: req.Payload}
	op, err := g.dec.DecodeCommand(cmd)
	if err != nil {
		var de *operation.DecodeError
		if !errors.As(err, &de) {
			g.log.Error("gateway: decoder misconfigured", "error", err.Error())
			return g.rules.Unavailable("", req.Operation, "check the command")
		}
		return g.rules.Rejected(de.Key, de.Operation, string(de.Code), decodeReason(de))
	}
	// The command is published as decoded: normalised, and its free text
	// masked by the rule every face applies (operation.MaskText), so that
	// the commands stream holds no card number or secret a caller put in a
	// comment. Free text is outside the fingerprint: the key and the
	// message id stay those of the request.
	decoded, err := op.Command()
	if err != nil {
		g.log.Error("gateway: decoded command not encoded", "operation_key", op.Key.String(), "error", err.Error())
		return g.rules.Unavailable(op.Key.String(), op.Type, "encode the command")
	}
	cmd.Payload = decoded.Payload
	key := op.Key.String()
	token, replies := g.await()
	defer g.forget(token)

	pctx, cancel := context.WithTimeout(ctx, g.cfg.PublishTimeout)
	ack, err := g.prod.PublishWith(pctx, cmd, producer.PublishOptions{MsgID: producer.MsgID(op), ReplyTo: g.inbox + "." + token})
	cancel()
	if err != nil {
		g.log.Warn("gateway: command not handed to JetStream", "operation_key", key, "error", err.Error())
		return g.rules.Unavailable(key, op.Type, "hand the command to JetStream")
	}
	g.sent.add(key, g.now())
	timer := time.NewTimer(g.waitFor(req.Wait))
	defer timer.Stop()

	var watched chan operation.Result
	if ack.Duplicate {
		// The daemon answers the original message, not this copy: follow
		// the results of the key, then read the journal (a result published
		// before the watch began is already there).
		ch, stop, err := g.watchKey(op.Type, key)
		if err != nil {
			g.log.Warn("gateway: results watch failed", "operation_key", key, "error", err.Error())
		} else {
			defer stop()
			watched = ch
		}
		if a, ok := g.settled(ctx, op, true); ok {
			return a
		}
		if a, ok := g.awaiting(ctx, op); ok {
			return a
		}
	}
	for {
		select {
		case r := <-replies:
			if r.Status == operation.ResultPending {
				if r.Approval != nil {
					// Waits for a person: nothing happens before a decision,
					// so the call answers now (await_approval, with the
					// link) instead of holding the caller for the bound.
					return g.rules.FromResult(r)
				}
				continue
			}
			// The reply subject is this call's alone, so the result answers
			// this command even under another key: one the daemon derived
			// otherwise (another env) or none at all (rejected before a key,
			// e.g. a type the daemon does not know).
			if r.OperationKey != key && r.OperationKey != "" {
				g.log.Warn("gateway: the daemon answered under another key: are the gateway's and the daemon's env and operation types the same?",
					"operation_key", key, "daemon_key", r.OperationKey)
			}
			return g.rules.FromResult(r)
		case <-watched:
			// Any result for the key, maybe answering another request's
			// payload: the journal row says what it means for this one.
			if a, ok := g.settled(ctx, op, true); ok {
				return a
			}
			if a, ok := g.awaiting(ctx, op); ok {
				return a
			}
		case <-timer.C:
			return g.pendingAnswer(ctx, op, ack.Duplicate)
		case <-ctx.Done():
			return g.rules.FromResult(operation.Result{OperationKey: key, Operation: op.Type,
				Status: operation.ResultPending, TargetSystem: op.TargetSystem})
		case <-g.done:
			return g.rules.FromResult(operation.Result{OperationKey: key, Operation: op.Type,
				Status: operation.ResultPending, TargetSystem: op.TargetSystem})
		}
	}
}

// waitFor is the bound of one call.
func (g *Gateway) waitFor(asked time.Duration) time.Duration {
	if asked <= 0 {
		return g.cfg.Wait
	}
	return min(asked, g.cfg.MaxWait)
}

// settled answers from the journal row when it settles the call: a final
// row with this request's fingerprint, or a row with another (a conflict).
func (g *Gateway) settled(ctx context.Context, op operation.Operation, replayed bool) (Answer, bool) {
	rec, err := g.store.Get(ctx, op.Key.String())
	if err != nil {
		if !errors.Is(err, journal.ErrNotFound) && ctx.Err() == nil {
			g.log.Warn("gateway: journal read failed", "operation_key", op.Key.String(), "error", err.Error())
		}
		return Answer{}, false
	}
	if rec.RequestHash != op.Fingerprint {
		return g.rules.Conflict(rec, g.conflictFields(ctx, op)), true
	}
	if !rec.Status.Terminal() {
		return Answer{}, false
	}
	res := resultOf(rec)
	res.Replayed = replayed
	return g.rules.FromResult(res), true
}

// awaiting answers a call whose intent waits for a person's approval (the
// journal row says so, for this request's fingerprint): the call returns at
// once, as nothing can happen before a decision.
func (g *Gateway) awaiting(ctx context.Context, op operation.Operation) (Answer, bool) {
	rec, err := g.store.Get(ctx, op.Key.String())
	if err != nil || rec.RequestHash != op.Fingerprint || rec.Status != journal.StatusAwaitingApproval {
		return Answer{}, false
	}
	a := g.rules.FromRecord(rec, g.now())
	a.JournalStatus = ""
	a.Approval = g.approvalWait(ctx, op.Key.String())
	return a, true
}

// approvalWait is what an answer says of an intent's wait for a person:
// until when, the approvals needed and given, the link. Nil when the
// record cannot be read (the answer still says await_approval).
func (g *Gateway) approvalWait(ctx context.Context, key string) *operation.ApprovalWait {
	ap, err := g.store.Approval(ctx, key)
	if err != nil {
		if !errors.Is(err, journal.ErrNotFound) && ctx.Err() == nil {
			g.log.Warn("gateway: approval read failed", "operation_key", key, "error", err.Error())
		}
		return nil
	}
	w := &operation.ApprovalWait{ExpiresAt: ap.ExpiresAt.UTC(), Approvers: ap.Approvers, Approved: ap.Approved()}
	if g.approvalURL != nil {
		w.URL = g.approvalURL(key)
	}
	return w
}

// conflictFields names the fields of op that differ from the key's first
// request, by the digests the journal stored with it.
func (g *Gateway) conflictFields(ctx context.Context, op operation.Operation) []string {
	stored, err := g.store.FieldDigests(ctx, op.Key.String())
	if err != nil {
		g.log.Warn("gateway: field digests not read", "operation_key", op.Key.String(), "error", err.Error())
		return nil
	}
	return operation.ConflictFields(stored, op.FieldDigests())
}

// pendingAnswer is the answer when the bound passed: the journal row's
// story when there is one (an unknown outcome past review needs a person),
// else "queued".
func (g *Gateway) pendingAnswer(ctx context.Context, op operation.Operation, duplicate bool) Answer {
	key := op.Key.String()
	rec, err := g.store.Get(ctx, key)
	switch {
	case err == nil && rec.RequestHash != op.Fingerprint:
		return g.rules.Conflict(rec, g.conflictFields(ctx, op))
	case err == nil && rec.Status.Terminal():
		// Settled just now: its result is on the way.
		return g.rules.FromResult(resultWith(rec, duplicate))
	case err == nil:
		a := g.rules.FromRecord(rec, g.now())
		a.JournalStatus = ""
		return a
	}
	return g.queued(key, op.Type, op.TargetSystem)
}

// queued is the answer for a command published but not claimed yet.
func (g *Gateway) queued(key, opType, target string) Answer {
	return g.rules.Queued(key, opType, target)
}

func resultWith(rec journal.Record, replayed bool) operation.Result {
	r := resultOf(rec)
	r.Replayed = replayed
	return r
}

// decodeReason names the field the way the caller sent it: the gateway
// sends the intent as the event id too.
func decodeReason(de *operation.DecodeError) string {
	field := de.Field
	if field == "event_id" {
		field = "intent_id"
	}
	msg := strings.ReplaceAll(de.Msg, "event_id", "intent_id")
	if field == "" {
		return string(de.Code) + ": " + msg
	}
	return field + ": " + msg
}
