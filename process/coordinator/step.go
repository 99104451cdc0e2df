package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/producer"
)

// errWaiting: a step has no final outcome yet (it is being retried, looked
// up, or waits for a person); the command comes back later.
var errWaiting = errors.New("a step is still settling")

// errAwaitingApproval: a step waits for a person's approval; the command
// comes back after ApprovalWait, not held meanwhile.
var errAwaitingApproval = errors.New("a step awaits approval")

// Codes of a step that failed before it reached the journal.
const (
	// CodeStepUnbuildable: a placeholder could not be filled (a stored
	// result lacks the member a template reads).
	CodeStepUnbuildable = "step_payload_unbuildable"
	// CodeStepRowMissing: a step to compensate has no succeeded row (its
	// row was purged, or never settled): a person decides.
	CodeStepRowMissing = "step_not_succeeded"
)

// outcomeKind is how a step or compensation ended.
type outcomeKind int

const (
	succeeded outcomeKind = iota + 1
	// failed: failed_final in the journal, or refused before it was sent
	// (a payload the operation type refuses): nothing was made.
	failed
	// conflict: the step's key holds another request.
	conflict
)

type outcome struct {
	kind outcomeKind
	code string
}

// step does what the record calls for next — await the current step and
// move on, or await the current compensation and move back — and returns
// the record as it then stands.
func (r *run) step() (*journal.ProcessRecord, error) {
	rec := r.rec
	n := len(r.def.Steps)
	var (
		p    journal.ProcessProgress
		name string
	)
	switch rec.Status {
	case journal.ProcessRunning:
		i := rec.Step
		if i >= n {
			p = journal.ProcessProgress{Status: journal.ProcessSucceeded, Step: n}
			break
		}
		s := &r.def.Steps[i]
		name = s.Name
		out, err := r.await(i, false, &s.Action, r.keys.Steps[i])
		if err != nil {
			return nil, err
		}
		r.c.d.Metrics.steps.WithLabelValues(r.def.Name, s.Name, "step", outcomeNames[out.kind]).Inc()
		if r.died(StepSettled, s.Name) {
			return nil, errDied
		}
		switch out.kind {
		case succeeded:
			p = journal.ProcessProgress{Status: journal.ProcessRunning, Step: i + 1}
			if i+1 == n {
				p.Status = journal.ProcessSucceeded
			}
		case failed:
			r.log.Warn("step failed finally: compensating the steps before it, newest first", "step", s.Name, "error_code", out.code)
			p = journal.ProcessProgress{Status: journal.ProcessCompensating, Step: i - 1, FailedStep: s.Name, ErrorCode: out.code}
			if i == 0 {
				p.Status = journal.ProcessCompensated // nothing before it to undo
			}
		case conflict:
			r.log.Error("a step's key holds another request: the process needs a person", "step", s.Name)
			p = journal.ProcessProgress{Status: journal.ProcessNeedsReview, Step: i, FailedStep: s.Name, ErrorCode: out.code}
		}
	case journal.ProcessCompensating:
		j := rec.Step
		back := journal.ProcessProgress{Status: journal.ProcessCompensating, Step: j - 1, FailedStep: rec.FailedStep, ErrorCode: rec.ErrorCode}
		if j-1 < 0 {
			back.Status, back.Step = journal.ProcessCompensated, -1
		}
		if j < 0 {
			p = back
			break
		}
		s := &r.def.Steps[j]
		name = s.Name
		if s.Compensation == nil {
			p = back // left as it is: nothing declared to undo it
			break
		}
		row, err := r.c.d.Store.Get(r.ctx, r.keys.Steps[j].String())
		if err != nil && !errors.Is(err, journal.ErrNotFound) {
			return nil, err
		}
		if err != nil || row.Status != journal.StatusSucceeded {
			// Only a step the journal says succeeded is compensated, and
			// only its own effect: anything else is for a person.
			r.log.Error("a step to compensate has no succeeded row: the process needs a person", "step", s.Name)
			p = journal.ProcessProgress{Status: journal.ProcessNeedsReview, Step: j, FailedStep: s.Name, ErrorCode: CodeStepRowMissing}
			break
		}
		out, err := r.await(j, true, s.Compensation, r.keys.Compensations[j])
		if err != nil {
			return nil, err
		}
		r.c.d.Metrics.steps.WithLabelValues(r.def.Name, s.Name, "compensation", outcomeNames[out.kind]).Inc()
		if r.died(StepSettled, s.Name+"/compensate") {
			return nil, errDied
		}
		if out.kind == succeeded {
			p = back
			break
		}
		r.log.Error("compensation failed: the process needs a person", "step", s.Name, "error_code", out.code)
		p = journal.ProcessProgress{Status: journal.ProcessNeedsReview, Step: j, FailedStep: s.Name, ErrorCode: out.code}
	default:
		return nil, fmt.Errorf("process %s is %s", rec.Key, rec.Status)
	}
	next, err := r.advance(p)
	if err != nil {
		return nil, err
	}
	if r.died(Advanced, name) {
		return nil, errDied
	}
	return next, nil
}

// values are what a payload of step i (comp: of its compensation) is built
// from: the process input, and the results of the steps before it (for a
// compensation, its own step's too) that succeeded.
func (r *run) values(i int, comp bool) (*process.Values, error) {
	v := &process.Values{Input: process.Input(r.op), IntentID: r.op.Key.IntentID, Key: r.op.Key.String(), EventID: r.op.EventID,
		Steps: map[string]process.StepResult{}}
	upTo := i
	if comp {
		upTo = i + 1
	}
	for j := range upTo {
		rec, err := r.c.d.Store.Get(r.ctx, r.keys.Steps[j].String())
		if errors.Is(err, journal.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if rec.Status == journal.StatusSucceeded {
			v.Steps[r.def.Steps[j].Name] = process.StepResult{TargetObjectID: rec.TargetObjectID, Result: rec.Result}
		}
	}
	return v, nil
}

// await brings step i's command (comp: its compensation's) to a final
// outcome: built from the input and the stored results, sent as an
// ordinary keyed command unless the journal already settled it, then
// awaited in the journal. A row that is not final (started, held for a
// retry, unknown and being looked up) is waited on, never decided here;
// past StepWait the run ends with errWaiting.
func (r *run) await(i int, comp bool, act *process.Action, key operation.Key) (outcome, error) {
	name := r.def.Steps[i].Name
	if comp {
		name += "/compensate"
	}
	v, err := r.values(i, comp)
	if err != nil {
		return outcome{}, err
	}
	payload, approval, err := act.Build(v, r.op.ApprovalID)
	if err != nil {
		r.log.Error("step payload cannot be built: nothing sent", "step", name, "error", err.Error())
		return outcome{kind: failed, code: CodeStepUnbuildable}, nil
	}
	ks := key.String()
	cmd := operation.Command{EventID: ks, Operation: act.Operation, OperationKey: ks, ApprovalID: approval, Payload: payload}
	stepOp, err := (&operation.Decoder{Env: r.c.d.Processes.Env(), Registry: r.c.d.Registry}).DecodeCommand(cmd)
	if err != nil {
		var de *operation.DecodeError
		if errors.As(err, &de) {
			r.log.Error("step refused before it was sent: nothing made", "step", name, "reason", string(de.Code), "field", de.Field)
			return outcome{kind: failed, code: string(de.Code)}, nil
		}
		return outcome{}, err
	}
	wake, stop, err := r.c.watch.add(act.Operation, ks)
	if err != nil {
		return outcome{}, err
	}
	defer stop()
	deadline := time.NewTimer(r.c.cfg.StepWait)
	defer deadline.Stop()
	poll := time.NewTicker(r.c.cfg.Poll)
	defer poll.Stop()
	sent := false
	for {
		row, err := r.c.d.Store.Get(r.ctx, ks)
		switch {
		case err == nil && row.RequestHash != stepOp.Fingerprint:
			return outcome{kind: conflict, code: "idempotency_key_payload_mismatch"}, nil
		case err == nil && row.Status == journal.StatusSucceeded:
			return outcome{kind: succeeded}, nil
		case err == nil && row.Status == journal.StatusFailedFinal:
			return outcome{kind: failed, code: row.ErrorCode}, nil
		case err == nil && row.Status == journal.StatusUnknown && crashpoint.Broken(crashpoint.CompensateUnknown):
			// A soak build told to break it: an unknown outcome taken for a
			// refusal, without the lookup.
			return outcome{kind: failed, code: "outcome_unknown"}, nil
		case err == nil && row.Status == journal.StatusAwaitingApproval:
			r.log.Info("step waits for a person's approval: the process command comes back later", "step", name, "operation_key", ks)
			return outcome{}, errAwaitingApproval
		case err != nil && !errors.Is(err, journal.ErrNotFound):
			return outcome{}, err
		}
		if !sent {
			if r.died(BeforeStep, name) {
				return outcome{}, errDied
			}
			// Sent on every delivery that waits on it: the first time, and
			// again should the step's own command have been given up. A
			// copy is dropped by the commands stream (its Nats-Msg-Id) or
			// answered from the journal.
			if _, err := r.c.prod.PublishWith(r.ctx, cmd, producer.PublishOptions{MsgID: producer.MsgID(stepOp)}); err != nil {
				return outcome{}, fmt.Errorf("send step %s: %w", name, err)
			}
			sent = true
			r.log.Info("step sent", "step", name, "operation_key", ks)
		}
		select {
		case <-wake:
		case <-poll.C:
		case <-deadline.C:
			r.log.Info("step not settled yet: the process command comes back", "step", name, "operation_key", ks)
			return outcome{}, errWaiting
		case <-r.ctx.Done():
			return outcome{}, context.Cause(r.ctx)
		}
	}
}
