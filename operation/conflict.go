package operation

import (
	"fmt"
	"strings"
)

// Existing is, on a conflict, the outcome of the key's first request: the
// conflicting request executed nothing, and the caller must not mistake
// the first request's effect (a payment taken, a task made) for nothing.
type Existing struct {
	// Status is the first request's outcome as a result status: succeeded,
	// failed_final, or pending while it is still being settled.
	Status ResultStatus `json:"status"`
	// TargetObjectID names the effect the first request made, when it made
	// one.
	TargetObjectID string `json:"target_object_id,omitempty"`
	// ErrorCode is the first request's safe error code, when it has one.
	ErrorCode string `json:"error_code,omitempty"`
}

// ConflictReason is the reason of a conflict, on every face: which fields
// differ (by name, never value), that nothing was executed for this
// request, what became of the first one, and what a changed request is.
// Where money moves (targetSystem "payments") a changed request is a
// separate payment a person must approve, never a correction of the first.
func ConflictReason(targetSystem string, fields []string, ex *Existing) string {
	what := "The request differs"
	switch len(fields) {
	case 0:
	case 1:
		what = fields[0] + " differs"
	default:
		what = strings.Join(fields[:len(fields)-1], ", ") + " and " + fields[len(fields)-1] + " differ"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s from the first request for this intent, so nothing was executed for this one.", what)
	money := targetSystem == "payments"
	if ex != nil {
		switch ex.Status {
		case ResultSucceeded:
			obj := "its object"
			if ex.TargetObjectID != "" {
				obj = "object " + ex.TargetObjectID
			}
			if money {
				fmt.Fprintf(&b, " The first request succeeded: the payment provider holds %s, and that money has moved.", obj)
			} else {
				fmt.Fprintf(&b, " The first request succeeded: %s exists in the target.", obj)
			}
		case ResultFailedFinal:
			code := ex.ErrorCode
			if code == "" {
				code = "no error code"
			}
			fmt.Fprintf(&b, " The first request failed for good (%s): it made nothing.", code)
		default:
			b.WriteString(" The first request is still being settled: look its outcome up by this operation_key before deciding anything.")
		}
	}
	if money {
		b.WriteString(" This request cannot change or replace the first one: a payment with the changed fields would be a separate, additional payment, " +
			"sent as a new intent (a new intent_id) and, where the policy says so, approved by a person on its own.")
		return b.String()
	}
	b.WriteString(" A changed request is a new intent: send it with a new intent_id.")
	return b.String()
}
