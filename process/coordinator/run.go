package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
)

// Boundary names a point of a process's run where a coordinator may die
// (Deps.AtBoundary, and the soak build's crash points of the same names).
type Boundary = crashpoint.Point

// The boundaries, in the order a step passes them.
const (
	// BeforeStep: the step's (or compensation's) command is about to be
	// sent; the journal may or may not know the step yet.
	BeforeStep = crashpoint.ProcessBeforeStep
	// StepSettled: the journal holds the step's final outcome; the process
	// record has not moved on.
	StepSettled = crashpoint.ProcessStepSettled
	// Advanced: the process record moved on; the next step's command is not
	// sent yet.
	Advanced = crashpoint.ProcessAdvanced
)

// errDied: the coordinator stopped at a boundary as if killed (AtBoundary).
var errDied = errors.New("coordinator stopped at a boundary")

// run is one delivery of a process command being handled.
type run struct {
	c     *Coordinator
	d     *consumer.Delivery
	op    operation.Operation // the decoded process command
	def   *process.Definition
	keys  process.Keys
	token int64
	rec   journal.ProcessRecord
	log   *slog.Logger
	// ctx ends when the coordinator shuts down or the lease is lost.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// errLeaseLost is the cause of a run's context when its lease was taken
// over.
var errLeaseLost = errors.New("process lease taken over")

// handle decides what becomes of one process command.
func (c *Coordinator) handle(d *consumer.Delivery) {
	op, def, err := c.decode(d)
	if err != nil {
		c.reject(d, err)
		return
	}
	keys, err := def.KeysOf(op.Key)
	if err != nil {
		c.reject(d, &operation.DecodeError{Code: operation.CodeBadKey, Field: "intent_id",
			Msg: fmt.Sprintf("too long for the keys of this process's steps: at most %d bytes", def.MaxIntentLen(op.Key.Env)),
			Key: op.Key.String(), EventID: op.EventID, Operation: op.Type})
		return
	}
	d.SetKey(op.Key.String())
	log := c.log.With("process_key", op.Key.String(), "event_id", op.EventID)
	claim, err := c.d.Store.ClaimProcess(c.work, journal.ProcessClaimRequest{
		Key: op.Key.String(), Name: def.Name, RequestHash: op.Fingerprint, Digest: def.Digest,
		EventID: op.EventID, ApprovalID: op.ApprovalID, Owner: c.cfg.Owner, LeaseTTL: c.cfg.LeaseTTL,
	})
	if err != nil {
		log.Error("process claim failed: the command comes back", "error", err.Error())
		d.Nak(c.cfg.ComeBack)
		return
	}
	switch claim.Decision {
	case journal.ProcessConflict:
		log.Warn("conflict: same process key, other input; nothing runs")
		d.Answer(conflictResult(op, claim.Record))
	case journal.ProcessReplay:
		c.answer(d, def, claim.Record, op, true, log)
	case journal.ProcessBusy:
		wait := c.cfg.ComeBack
		if !claim.Record.LeaseUntil.IsZero() && claim.Record.LeaseUntil.After(claim.Now) {
			wait = min(claim.Record.LeaseUntil.Sub(claim.Now)+100*time.Millisecond, c.cfg.StepWait)
		}
		c.pending(d, def, claim.Record, op, max(wait, c.cfg.ComeBack), log)
	case journal.ProcessRun:
		if claim.Record.Digest != def.Digest {
			// Recorded on another definition (possible only for a process
			// created between our read and our claim): decode again.
			c.redecode(d, claim, log)
			return
		}
		ctx, cancel := context.WithCancelCause(c.work)
		r := &run{c: c, d: d, op: op, def: def, keys: keys, token: claim.Token, rec: claim.Record, log: log, ctx: ctx, cancel: cancel}
		if claim.Resumed {
			log.Info("process resumed", "status", string(claim.Record.Status), "step", claim.Record.Step, "lease_token", claim.Token)
		}
		r.execute()
		cancel(nil)
	}
}

// redecode gives back the claim of a process recorded, in between, on
// another definition than the one its command was decoded by (two daemons
// on different configurations): the command comes back at once, to be
// decoded by the process's own.
func (c *Coordinator) redecode(d *consumer.Delivery, claim journal.ProcessClaim, log *slog.Logger) {
	if err := c.d.Store.ReleaseProcess(c.work, claim.Record.Key, claim.Token); err != nil {
		log.Warn("process release failed", "error", err.Error())
	}
	d.Nak(0)
}

// decode reads the command by the definition its process runs on: the
// configured one for a new process, the recorded one for a known process.
func (c *Coordinator) decode(d *consumer.Delivery) (operation.Operation, *process.Definition, error) {
	set := c.d.Processes
	op, err := set.Decode(d.Data())
	if err != nil {
		return op, nil, err
	}
	if subj, ok := d.Operation(); !ok || subj != op.Type {
		return op, nil, &operation.DecodeError{Code: operation.CodeKeyMismatch, Field: "operation",
			Msg: "the subject names another process than the envelope", Key: op.Key.String(), EventID: op.EventID, Operation: op.Type}
	}
	name, _ := process.IsProcess(op.Type)
	def, configured := set.Lookup(name)
	rec, err := c.d.Store.GetProcess(c.work, op.Key.String())
	switch {
	case errors.Is(err, journal.ErrNotFound):
		if !configured {
			return op, nil, &operation.DecodeError{Code: operation.CodeUnknownOperation, Field: "operation",
				Msg: "process " + name + " is no longer configured; only its running processes finish", Key: op.Key.String(), EventID: op.EventID, Operation: op.Type}
		}
		return op, def, nil
	case err != nil:
		return op, nil, fmt.Errorf("read process %s: %w", op.Key, err)
	case configured && rec.Digest == def.Digest:
		return op, def, nil
	}
	// The process runs on another definition: its own decides.
	old, err := c.definition(rec.Digest)
	if err != nil {
		return op, nil, err
	}
	op, err = set.DecodeAs(old.Digest, d.Data())
	return op, old, err
}

// definition returns the definition with that digest: known, or read back
// from the journal and compiled against today's operation types.
func (c *Coordinator) definition(digest string) (*process.Definition, error) {
	if def, ok := c.d.Processes.ByDigest(digest); ok {
		return def, nil
	}
	return Keep(c.work, c.d.Store, c.d.Processes, c.d.Registry, digest)
}

// Keep reads the definition kept under digest from the journal, compiles
// it against reg and adds it to set.
func Keep(ctx context.Context, ps journal.ProcessStore, set *process.Set, reg *operation.Registry, digest string) (*process.Definition, error) {
	kept, err := ps.Definition(ctx, digest)
	if err != nil {
		return nil, err
	}
	name, decl, err := process.Parse(kept.Body)
	if err != nil {
		return nil, err
	}
	def, err := process.Compile(name, decl, reg)
	if err != nil {
		return nil, fmt.Errorf("the definition processes of %s started on (digest %s) no longer compiles: %w", name, digest, err)
	}
	if def.Digest != digest {
		return nil, fmt.Errorf("process definition %s: its digest reads %s", digest, def.Digest)
	}
	if err := set.Keep(def); err != nil {
		return nil, err
	}
	return def, nil
}

// reject answers a command that cannot be a process: not JSON, unknown
// process, invalid input, a key its steps cannot carry.
func (c *Coordinator) reject(d *consumer.Delivery, err error) {
	var de *operation.DecodeError
	if !errors.As(err, &de) {
		// Not the input's fault (the journal could not be read, a kept
		// definition no longer compiles): the command comes back.
		c.log.Error("process command cannot be handled now: it comes back", "error", err.Error())
		d.Nak(c.cfg.StepWait)
		return
	}
	r := de.RejectedResult()
	r.CommandSeq = d.StreamSeq()
	a := answer.Rejected(r.OperationKey, r.Operation, r.ErrorCode, r.Reason)
	r.NextAction, r.Reason = string(a.NextAction), a.Reason
	c.log.Warn("process command rejected", "reason", string(de.Code), "field", de.Field, "detail", de.Msg,
		"process_key", r.OperationKey, "event_id", r.EventID)
	d.Reject(r, string(de.Code))
}

// answer publishes the process's final result and acknowledges its command.
func (c *Coordinator) answer(d *consumer.Delivery, def *process.Definition, rec journal.ProcessRecord, op operation.Operation, replayed bool, log *slog.Logger) {
	r, err := c.result(def, rec, op, replayed)
	if err != nil {
		log.Error("process result cannot be built: the command comes back", "error", err.Error())
		d.Nak(c.cfg.ComeBack)
		return
	}
	d.Answer(r)
}

// pending publishes a pending result and brings the command back after
// wait.
func (c *Coordinator) pending(d *consumer.Delivery, def *process.Definition, rec journal.ProcessRecord, op operation.Operation, wait time.Duration, log *slog.Logger) {
	r, err := c.result(def, rec, op, false)
	if err != nil {
		log.Warn("pending result cannot be built", "error", err.Error())
		d.Nak(wait)
		return
	}
	// The process is not at rest: its answer (process.Result) is pending,
	// with the next_action and reason of its state.
	d.AnswerThenNak(r, wait)
}

func (c *Coordinator) result(def *process.Definition, rec journal.ProcessRecord, op operation.Operation, replayed bool) (operation.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.work), 10*time.Second)
	defer cancel()
	v, err := process.Describe(ctx, def, rec, c.d.Store.Get)
	if err != nil {
		return operation.Result{}, err
	}
	return process.Result(v, op.EventID, replayed)
}

// conflictResult answers a process key reused with another input: the
// conflict rule of answer, as the worker answers an operation's.
func conflictResult(op operation.Operation, rec journal.ProcessRecord) operation.Result {
	a := answer.Thresholds{}.Of(answer.StateConflict, answer.Facts{Operation: op.Type, TargetSystem: process.TargetSystem,
		ErrorCode: answer.CodeKeyPayloadMismatch, Existing: &operation.Existing{Status: processResultStatus(rec.Status), ErrorCode: rec.ErrorCode}})
	a.OperationKey = rec.Key
	return a.Envelope(op.EventID)
}

func processResultStatus(s journal.ProcessStatus) operation.ResultStatus {
	switch s {
	case journal.ProcessSucceeded:
		return operation.ResultSucceeded
	case journal.ProcessCompensated, journal.ProcessNeedsReview:
		return operation.ResultFailedFinal
	}
	return operation.ResultPending
}

// execute runs the process from where its record stands until it is at
// rest (then answers), or until a step keeps it waiting (then the command
// comes back), or until the lease is lost.
func (r *run) execute() {
	stopBeats := r.heartbeat()
	defer stopBeats()
	for {
		if r.rec.Status.AtRest() {
			r.c.d.Metrics.processes.WithLabelValues(r.def.Name, string(r.rec.Status)).Inc()
			r.log.Info("process at rest", "status", string(r.rec.Status), "failed_step", r.rec.FailedStep, "error_code", r.rec.ErrorCode)
			stopBeats()
			r.c.answer(r.d, r.def, r.rec, r.op, false, r.log)
			return
		}
		next, err := r.step()
		switch {
		case errors.Is(err, errDied):
			// As if killed: nothing more is written, acked or released;
			// the command comes back after AckWait.
			stopBeats()
			r.d.Forsake()
			return
		case errors.Is(err, errWaiting), errors.Is(err, errAwaitingApproval):
			r.c.d.Metrics.comeBacks.Inc()
			stopBeats()
			r.release()
			back := r.c.cfg.ComeBack
			if errors.Is(err, errAwaitingApproval) {
				back = r.c.cfg.ApprovalWait
			}
			r.c.pending(r.d, r.def, r.rec, r.op, back, r.log)
			return
		case err != nil:
			stopBeats()
			if cause := context.Cause(r.ctx); errors.Is(cause, errLeaseLost) {
				r.log.Warn("process lease taken over: its new coordinator answers", "lease_token", r.token)
				r.d.Nak(r.c.cfg.ComeBack)
				return
			}
			if errors.Is(context.Cause(r.ctx), ErrShutdown) {
				r.log.Info("shutting down: the process command comes back", "step", r.rec.Step)
			} else {
				r.log.Error("process step failed: the command comes back", "error", err.Error())
			}
			r.release()
			r.d.Nak(r.c.cfg.ComeBack)
			return
		}
		r.rec = *next
	}
}

// died reports whether the coordinator stops at boundary b as if killed.
func (r *run) died(b Boundary, step string) bool {
	crashpoint.Hit(b)
	if f := r.c.d.AtBoundary; f != nil && f(b, r.op.Key.String(), step) {
		r.cancel(errDied)
		return true
	}
	return false
}

// release gives the lease up so that the command's next delivery, on any
// coordinator, takes the process over at once.
func (r *run) release() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 5*time.Second)
	defer cancel()
	if err := r.c.d.Store.ReleaseProcess(ctx, r.op.Key.String(), r.token); err != nil && !errors.Is(err, journal.ErrIllegalTransition) {
		r.log.Warn("process release failed: its lease runs out instead", "error", err.Error())
	}
}

// heartbeat keeps the lease and the command alive while the run lasts; the
// returned function stops it (safe twice).
func (r *run) heartbeat() func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(r.c.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-r.ctx.Done():
				return
			case <-t.C:
			}
			if err := r.d.InProgress(); err != nil {
				r.log.Warn("in-progress signal failed", "error", err.Error())
			}
			err := r.c.d.Store.HeartbeatProcess(r.ctx, r.op.Key.String(), r.token, r.c.cfg.LeaseTTL)
			if errors.Is(err, journal.ErrStaleToken) {
				r.cancel(errLeaseLost)
				return
			}
			if err != nil && r.ctx.Err() == nil {
				r.log.Warn("process heartbeat failed", "error", err.Error())
			}
		}
	}()
	var once bool
	return func() {
		if !once {
			once = true
			close(done)
			<-stopped
		}
	}
}

// advance moves the process record on under the run's token.
func (r *run) advance(p journal.ProcessProgress) (*journal.ProcessRecord, error) {
	p.Key, p.Token = r.op.Key.String(), r.token
	rec, err := r.c.d.Store.AdvanceProcess(r.ctx, p)
	if errors.Is(err, journal.ErrStaleToken) {
		r.cancel(errLeaseLost)
	}
	if err != nil {
		return nil, err
	}
	return &rec, nil
}
