// Processes: a declared business process submitted as one call
// (operation "process.<name>") and its state read by its key — the same
// answers, next_action rules and waits as an operation's, the process's
// view (each step's status, key and object) in the answer's result.

package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/producer"
)

// ProcessJournal is what the gateway reads of a process: its record and
// the definition it runs on. Both engines' stores satisfy it; a journal
// without it answers process lookups unavailable.
type ProcessJournal interface {
	GetProcess(ctx context.Context, key string) (journal.ProcessRecord, error)
	Definition(ctx context.Context, digest string) (journal.ProcessDefinition, error)
}

// Processes returns the declared processes the gateway offers, sorted by
// name (none without Deps.Processes).
func (g *Gateway) Processes() []*process.Definition {
	if g.procs == nil {
		return nil
	}
	return g.procs.Definitions()
}

// knownProcess reports whether name ("process.<name>") is a declared
// process.
func (g *Gateway) knownProcess(opName string) bool {
	name, ok := process.IsProcess(opName)
	if !ok || g.procs == nil {
		return false
	}
	_, ok = g.procs.Lookup(name)
	return ok
}

// submitProcess is Submit for a process: the command validated by the
// process's declaration, published on its subject, and the wait for the
// process's outcome — which takes its steps' time, so a pending answer is
// common: the agent polls the process's key.
func (g *Gateway) submitProcess(ctx context.Context, req Request) Answer {
	name, _ := process.IsProcess(req.Operation)
	if !g.knownProcess(req.Operation) {
		return g.rules.Rejected("", req.Operation, string(operation.CodeUnknownOperation),
			"operation: no process "+name+" is declared here")
	}
	def, _ := g.procs.Lookup(name)
	cmd := operation.Command{EventID: req.IntentID, Operation: req.Operation, IntentID: req.IntentID,
		ApprovalID: req.ApprovalID, Payload: req.Payload}
	op, err := g.procs.DecodeCommand(cmd)
	if err != nil {
		var de *operation.DecodeError
		if !errors.As(err, &de) {
			g.log.Error("gateway: process decoder misconfigured", "error", err.Error())
			return g.rules.Unavailable("", req.Operation, "check the command")
		}
		return g.rules.Rejected(de.Key, de.Operation, string(de.Code), decodeReason(de))
	}
	key := op.Key.String()
	if _, err := def.KeysOf(op.Key); err != nil {
		return g.rules.Rejected(key, op.Type, string(operation.CodeBadKey),
			fmt.Sprintf("intent_id: too long for the keys of this process's steps: at most %d bytes", def.MaxIntentLen(g.cfg.Env)))
	}
	decoded, err := op.Command()
	if err != nil {
		return g.rules.Unavailable(key, op.Type, "encode the command")
	}
	cmd.Payload = decoded.Payload
	token, replies := g.await()
	defer g.forget(token)
	// The process's results are followed from the start: a copy of a
	// process already running is answered by its first command's result.
	watched, stop, err := g.watchKey(op.Type, key)
	if err != nil {
		g.log.Warn("gateway: results watch failed", "operation_key", key, "error", err.Error())
	} else {
		defer stop()
	}
	pctx, cancel := context.WithTimeout(ctx, g.cfg.PublishTimeout)
	ack, err := g.prod.PublishWith(pctx, cmd, producer.PublishOptions{MsgID: producer.MsgID(op), ReplyTo: g.inbox + "." + token})
	cancel()
	if err != nil {
		g.log.Warn("gateway: process command not handed to JetStream", "operation_key", key, "error", err.Error())
		return g.rules.Unavailable(key, op.Type, "hand the command to JetStream")
	}
	g.sent.add(key, g.now())
	if ack.Duplicate {
		if a, ok := g.processSettled(ctx, op, true); ok {
			return a
		}
	}
	timer := time.NewTimer(g.waitFor(req.Wait))
	defer timer.Stop()
	for {
		select {
		case r := <-replies:
			if r.Status == operation.ResultPending {
				continue
			}
			return g.processAnswer(r)
		case <-watched:
			if a, ok := g.processSettled(ctx, op, ack.Duplicate); ok {
				return a
			}
		case <-timer.C:
			return g.processNow(ctx, op.Key.String(), op.Type)
		case <-ctx.Done():
			return g.processNow(context.WithoutCancel(ctx), op.Key.String(), op.Type)
		case <-g.done:
			return g.processNow(context.WithoutCancel(ctx), op.Key.String(), op.Type)
		}
	}
}

// processSettled answers from the journal when the process is at rest (or
// its key holds another input).
func (g *Gateway) processSettled(ctx context.Context, op operation.Operation, replayed bool) (Answer, bool) {
	pj, ok := g.store.(ProcessJournal)
	if !ok {
		return Answer{}, false
	}
	rec, err := pj.GetProcess(ctx, op.Key.String())
	if err != nil {
		return Answer{}, false
	}
	if rec.RequestHash != op.Fingerprint {
		return g.processConflict(op.Type, rec), true
	}
	if !rec.Status.AtRest() {
		return Answer{}, false
	}
	a := g.lookupProcess(ctx, rec.Key)
	a.Replayed = replayed
	return a, true
}

// processNow is the answer when the wait passed: the process as it stands
// (pending while it runs), or queued when it is not recorded yet.
func (g *Gateway) processNow(ctx context.Context, key, opType string) Answer {
	a := g.lookupProcess(ctx, key)
	if a.Status == StatusNotFound {
		return g.queued(key, opType, process.TargetSystem)
	}
	return a
}

// lookupProcess answers from the journal for a process key: its record
// and each step's row.
func (g *Gateway) lookupProcess(ctx context.Context, key string) Answer {
	k, _ := operation.ParseKey(key)
	pj, ok := g.store.(ProcessJournal)
	if !ok {
		return g.rules.Unavailable(key, k.Operation, "read the process (this journal keeps none)")
	}
	rec, err := pj.GetProcess(ctx, key)
	if errors.Is(err, journal.ErrNotFound) {
		if g.sent.has(key, g.now()) {
			return g.queued(key, k.Operation, process.TargetSystem)
		}
		return g.rules.NotFound(key, k.Operation)
	}
	if err != nil {
		g.log.Warn("gateway: process read failed", "operation_key", key, "error", err.Error())
		return g.rules.Unavailable(key, k.Operation, "read the journal")
	}
	def, err := g.processDefinition(ctx, pj, rec.Digest)
	if err != nil {
		g.log.Warn("gateway: process definition not read", "operation_key", key, "error", err.Error())
		return g.rules.Unavailable(key, k.Operation, "read the process's definition")
	}
	v, err := process.Describe(ctx, def, rec, g.store.Get)
	if err != nil {
		g.log.Warn("gateway: process steps not read", "operation_key", key, "error", err.Error())
		return g.rules.Unavailable(key, k.Operation, "read the process's steps")
	}
	res, err := process.Result(v, rec.EventID, false)
	if err != nil {
		return g.rules.Unavailable(key, k.Operation, "encode the process's state")
	}
	a := g.processAnswer(res)
	a.JournalStatus = string(rec.Status)
	return a
}

// processDefinition is the definition a process runs on: a declared one,
// or the one the journal keeps under its digest.
func (g *Gateway) processDefinition(ctx context.Context, pj ProcessJournal, digest string) (*process.Definition, error) {
	if g.procs != nil {
		if def, ok := g.procs.ByDigest(digest); ok {
			return def, nil
		}
	}
	kept, err := pj.Definition(ctx, digest)
	if err != nil {
		return nil, err
	}
	name, decl, err := process.Parse(kept.Body)
	if err != nil {
		return nil, err
	}
	return process.Compile(name, decl, g.reg)
}

// processAnswer is the answer for a process's result envelope: the rule
// of the process's state, with a reason that tells the process's story.
func (g *Gateway) processAnswer(res operation.Result) Answer {
	a := g.rules.FromResult(res)
	var v process.View
	if len(res.Result) == 0 || json.Unmarshal(res.Result, &v) != nil || v.Process == "" {
		return a
	}
	b := process.Answer(g.rules, v, res.Operation)
	a.Status, a.NextAction, a.Reason, a.RetryAfterMS = b.Status, b.NextAction, b.Reason, b.RetryAfterMS
	return a
}

func processStatus(s journal.ProcessStatus) operation.ResultStatus {
	switch s {
	case journal.ProcessSucceeded:
		return operation.ResultSucceeded
	case journal.ProcessCompensated, journal.ProcessNeedsReview:
		return operation.ResultFailedFinal
	}
	return operation.ResultPending
}

// processConflict is the answer for a process key that holds another
// input than the request's: the conflict rule, as for an operation.
func (g *Gateway) processConflict(opType string, rec journal.ProcessRecord) Answer {
	a := g.rules.Of(answer.StateConflict, answer.Facts{Operation: opType, TargetSystem: process.TargetSystem,
		ErrorCode: CodeKeyPayloadMismatch, Existing: &operation.Existing{Status: processStatus(rec.Status), ErrorCode: rec.ErrorCode}})
	a.OperationKey = rec.Key
	return a
}
