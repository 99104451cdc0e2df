package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// StepNotStarted is the status of a step or compensation the journal holds
// no row for.
const StepNotStarted = "not_started"

// CodeNeedsReview is the error code of a process left for a person: a
// compensation failed finally, or a step's key holds another request.
const CodeNeedsReview = "process_needs_review"

// StepView is one step, or one compensation, as every face shows it: the
// journal's row for its key.
type StepView struct {
	Name         string `json:"name"`
	Operation    string `json:"operation"`
	OperationKey string `json:"operation_key"`
	// Status is the operation's journal status (started, succeeded,
	// failed_retryable, failed_final, unknown) or not_started.
	Status         string `json:"status"`
	TargetObjectID string `json:"target_object_id,omitempty"`
	ErrorCode      string `json:"error_code,omitempty"`
	Attempts       int    `json:"attempts,omitempty"`
	// Compensation is the step's compensation, when it has one.
	Compensation *StepView `json:"compensation,omitempty"`
}

// View is a process as every face shows it (the result envelope's result
// member, MCP, HTTP, trace): its record and each step's.
type View struct {
	ProcessKey string                `json:"process_key"`
	Process    string                `json:"process"`
	Status     journal.ProcessStatus `json:"process_status"`
	// Step is the current step's name ("" once at rest).
	Step       string     `json:"current_step,omitempty"`
	FailedStep string     `json:"failed_step,omitempty"`
	ErrorCode  string     `json:"error_code,omitempty"`
	Steps      []StepView `json:"steps"`
	// Resolution says that a person settled the process after it was left
	// for review (the evidence stays in the journal, for trace and the
	// console).
	Resolution *Resolution `json:"resolution,omitempty"`
}

// Resolution is an operator's settlement of a process, as answers show it.
type Resolution struct {
	Operator string    `json:"operator"`
	At       time.Time `json:"at"`
	// From is where the process had stopped: needs_review.
	From journal.ProcessStatus `json:"from"`
}

// Getter reads an operation's row (journal.Store.Get).
type Getter func(ctx context.Context, key string) (journal.Record, error)

// Describe builds the view of the process rec, run on def, reading each
// step's and compensation's row with get.
func Describe(ctx context.Context, def *Definition, rec journal.ProcessRecord, get Getter) (View, error) {
	pk, err := operation.ParseKey(rec.Key)
	if err != nil {
		return View{}, fmt.Errorf("process %s: %w", rec.Key, err)
	}
	keys, err := def.KeysOf(pk)
	if err != nil {
		return View{}, err
	}
	v := View{ProcessKey: rec.Key, Process: def.Name, Status: rec.Status, FailedStep: rec.FailedStep, ErrorCode: rec.ErrorCode,
		Steps: make([]StepView, len(def.Steps))}
	if rec.Resolved() {
		v.Resolution = &Resolution{Operator: rec.ResolvedBy, At: rec.ResolvedAt.UTC(), From: journal.ProcessNeedsReview}
	}
	if !rec.Status.AtRest() && rec.Step >= 0 && rec.Step < len(def.Steps) {
		v.Step = def.Steps[rec.Step].Name
	}
	for i, s := range def.Steps {
		sv, err := stepView(ctx, get, s.Name, s.Action.Operation, keys.Steps[i].String())
		if err != nil {
			return View{}, err
		}
		if s.Compensation != nil {
			cv, err := stepView(ctx, get, s.Name, s.Compensation.Operation, keys.Compensations[i].String())
			if err != nil {
				return View{}, err
			}
			sv.Compensation = &cv
		}
		v.Steps[i] = sv
	}
	return v, nil
}

func stepView(ctx context.Context, get Getter, name, op, key string) (StepView, error) {
	sv := StepView{Name: name, Operation: op, OperationKey: key, Status: StepNotStarted}
	r, err := get(ctx, key)
	if errors.Is(err, journal.ErrNotFound) {
		return sv, nil
	}
	if err != nil {
		return sv, fmt.Errorf("step %s (%s): %w", name, key, err)
	}
	sv.Status, sv.TargetObjectID, sv.ErrorCode, sv.Attempts = string(r.Status), r.TargetObjectID, r.ErrorCode, r.AttemptCount
	return sv, nil
}

// Result is the result envelope of a process in the state v describes:
// succeeded, failed_final once compensated (with the failed step's code) or
// left for a person (CodeNeedsReview), pending while it runs, with the
// next_action and reason of its answer (Answer). Its result member is v.
func Result(v View, eventID string, replayed bool) (operation.Result, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return operation.Result{}, err
	}
	r := operation.Result{OperationKey: v.ProcessKey, EventID: eventID, Operation: OperationPrefix + v.Process,
		TargetSystem: TargetSystem, Result: body, Replayed: replayed, ErrorCode: errorCode(v)}
	return Worded(r, v), nil
}
