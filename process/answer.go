package process

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// Answer is the answer for a process in the state v describes: the rule of
// its state (answer.ProcessState), with a reason that tells its story. The
// coordinator's results on NATS carry its status, next_action and reason,
// and every face gives the same.
func Answer(th answer.Thresholds, v View, opType string) answer.Answer {
	state := answer.ProcessState(v.Status)
	if v.Resolution != nil {
		state = answer.SettledProcessState(v.Status)
	}
	return th.Of(state, answer.Facts{Operation: opType, TargetSystem: TargetSystem,
		ErrorCode: errorCode(v), Detail: Story(v, v.ProcessKey)})
}

// errorCode is the error code of a process's result: the failed step's
// once compensated, CodeNeedsReview when left for a person, none else.
func errorCode(v View) string {
	switch v.Status {
	case journal.ProcessCompensated:
		return v.ErrorCode
	case journal.ProcessNeedsReview:
		return CodeNeedsReview
	}
	return ""
}

// Worded is r with the status, next_action and reason of the answer for
// the process v describes.
func Worded(r operation.Result, v View) operation.Result {
	a := Answer(answer.Thresholds{}, v, r.Operation)
	r.Status, r.NextAction, r.Reason = operation.ResultStatus(a.Status), string(a.NextAction), a.Reason
	return r
}

// Story is where the process v describes stands, in words for its answer's
// reason (answer.Facts.Detail); key is its process key.
func Story(v View, key string) string {
	if r := v.Resolution; r != nil {
		return fmt.Sprintf("it stopped at step %s (%s) and was left for review; %s settled it in the targets by hand and recorded it at %s (the evidence: idemgate trace %s)",
			v.FailedStep, orNone(v.ErrorCode), r.Operator, r.At.Format(time.RFC3339), key)
	}
	switch v.Status {
	case journal.ProcessSucceeded:
		return stepObjects(v, false)
	case journal.ProcessCompensated:
		undone := stepObjects(v, true)
		if undone == "" {
			undone = "nothing before it had to be undone"
		} else {
			undone = "the steps before it were compensated (" + undone + ")"
		}
		return fmt.Sprintf("step %s was refused for good (%s) and %s", v.FailedStep, orNone(v.ErrorCode), undone)
	case journal.ProcessNeedsReview:
		return fmt.Sprintf("step %s could not be compensated or settled (%s); see idemgate trace %s", v.FailedStep, orNone(v.ErrorCode), key)
	}
	switch {
	case v.Status == journal.ProcessCompensating && currentStatus(v) == string(journal.StatusAwaitingApproval):
		return fmt.Sprintf("step %s failed for good; the compensation of step %s waits for a person's approval", v.FailedStep, v.Step)
	case v.Status == journal.ProcessCompensating:
		return fmt.Sprintf("step %s failed for good and the steps before it are being compensated", v.FailedStep)
	case v.Step != "" && currentStatus(v) == string(journal.StatusAwaitingApproval):
		return "step " + v.Step + " waits for a person's approval"
	case v.Step != "":
		return "step " + v.Step + " is running"
	}
	return "it is starting"
}

func orNone(code string) string {
	if code == "" {
		return "no error code"
	}
	return code
}

// stepObjects lists the steps' objects ("invoice: <id>"), or with
// compensated, the compensations that ran.
func stepObjects(v View, compensated bool) string {
	var parts []string
	for _, s := range v.Steps {
		if compensated {
			if s.Compensation != nil && s.Compensation.Status == string(journal.StatusSucceeded) {
				parts = append(parts, s.Name+": "+s.Compensation.Operation+" "+s.Compensation.TargetObjectID)
			}
			continue
		}
		if s.Status == string(journal.StatusSucceeded) {
			parts = append(parts, s.Name+": "+s.TargetObjectID)
		}
	}
	return strings.Join(parts, ", ")
}

// currentStatus is the status of the step (or, compensating, the
// compensation) the process is at.
func currentStatus(v View) string {
	for _, s := range v.Steps {
		if s.Name != v.Step {
			continue
		}
		if v.Status == journal.ProcessCompensating && s.Compensation != nil {
			return s.Compensation.Status
		}
		return s.Status
	}
	return ""
}
