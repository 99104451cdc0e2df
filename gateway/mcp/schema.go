package mcp

import (
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/operation"
)

// maxSafeInteger is 2^53-1, the largest amount the decoder accepts: every
// JSON reader holds it exactly.
const maxSafeInteger = 1<<53 - 1

// Argument names every operation tool takes beside the type's fields.
const (
	argIntentID      = "intent_id"
	argApprovalID    = "approval_id"
	argApprovalToken = "approval_token"
)

// idPattern is the alphabet of keys and ids.
const idPattern = `^[A-Za-z0-9._~:-]+$`

func ptr[T any](v T) *T { return &v }

// InputSchema is the input schema of an operation type's tool: intent_id,
// approval_id (the caller's optional reference) and the type's fields
// with their kinds — money as integer minor units, currency as a 3-letter
// code, dates and times with their formats. Nothing else is accepted.
// env is the gateway's: intent_id's maxLength is what the operation key
// leaves for it under env (operation.MaxIntentLen), the limit the decoder
// enforces.
func InputSchema(env string, t operation.Type) (*jsonschema.Schema, error) {
	s := &jsonschema.Schema{
		Type:                 "object",
		Properties:           map[string]*jsonschema.Schema{},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
		Required:             []string{argIntentID},
	}
	s.Properties[argIntentID] = &jsonschema.Schema{
		Type: "string", MinLength: ptr(1), MaxLength: ptr(operation.MaxIntentLen(env, t.Name, operation.DefaultKeyVersion)), Pattern: idPattern,
		Description: "The business intent this call carries out: ONE id per intent (the approval, order or task you act on), " +
			"reused unchanged on every retry of that intent — never a new id per attempt or per call. " +
			"The same intent_id with the same fields is answered with the stored outcome and never executes twice; " +
			"changed fields under the same intent_id are refused as a conflict. Letters, digits and . _ ~ : - only; no card numbers or personal data.",
	}
	// approval_id is the caller's own reference, stored and traced; it
	// approves nothing (a person's approval is recorded by idemgate), so it
	// is never required: a schema that demanded one would teach a model to
	// make one up.
	s.Properties[argApprovalID] = &jsonschema.Schema{
		Type: "string", MinLength: ptr(1), MaxLength: ptr(operation.MaxKeyLen), Pattern: idPattern,
		Description: "Optional: your own reference for the approval process this call belongs to (a ticket, a chat thread), kept in the trail. " +
			"It authorises nothing: where a person must approve, the answer says next_action await_approval and gives the link. " +
			"Not part of the intent's fingerprint.",
	}
	s.Properties[argApprovalToken] = &jsonschema.Schema{
		Type: "string", MinLength: ptr(1), MaxLength: ptr(operation.MaxApprovalTokenLen),
		Description: "Optional: a pre-signed approval token your user's own system issued for exactly this request " +
			"(a signed JWT naming this operation, its operation_key and fingerprint). Pass it unchanged if you were given one; " +
			"never make one up. Without it, an operation that needs a person's approval waits for one.",
	}
	for _, f := range t.Fields {
		if f.Name == argIntentID || f.Name == argApprovalID || f.Name == argApprovalToken {
			return nil, fmt.Errorf("operation %s: field %s clashes with the tool's own argument", t.Name, f.Name)
		}
		s.Properties[f.Name] = fieldSchema(f)
		if f.Required {
			s.Required = append(s.Required, f.Name)
		}
	}
	s.PropertyOrder = append([]string{argIntentID, argApprovalID, argApprovalToken}, fieldNames(t)...)
	return s, nil
}

func fieldNames(t operation.Type) []string {
	out := make([]string, 0, len(t.Fields))
	for _, f := range t.Fields {
		out = append(out, f.Name)
	}
	return out
}

// fieldSchema is one payload field's schema, from its kind.
func fieldSchema(f operation.Field) *jsonschema.Schema {
	switch f.Kind {
	case operation.KindMoney:
		minimum := 1.0
		if f.AllowZero {
			minimum = 0
		}
		return &jsonschema.Schema{Type: "integer", Minimum: ptr(minimum), Maximum: ptr(float64(maxSafeInteger)),
			Description: "Amount in integer minor units of the currency (kopecks, cents): 1,250.00 RUB is 125000. " +
				"Never a decimal, never a string. Part of the intent: a changed amount is a new intent."}
	case operation.KindCurrency:
		return &jsonschema.Schema{Type: "string", Pattern: "^[A-Za-z]{3}$",
			Description: "ISO 4217 currency code, e.g. RUB (case does not matter)."}
	case operation.KindTime:
		return &jsonschema.Schema{Type: "string", Format: "date-time",
			Description: "RFC 3339 timestamp with an offset, e.g. 2030-01-15T10:00:00+03:00."}
	case operation.KindDate:
		return &jsonschema.Schema{Type: "string", Format: "date", Pattern: `^\d{4}-\d{2}-\d{2}$`,
			Description: "Calendar date YYYY-MM-DD."}
	case operation.KindInt:
		return &jsonschema.Schema{Type: "integer", Minimum: ptr(float64(-maxSafeInteger)), Maximum: ptr(float64(maxSafeInteger))}
	case operation.KindBool:
		return &jsonschema.Schema{Type: "boolean"}
	default:
		maxLen := f.MaxLen
		if maxLen == 0 {
			maxLen = operation.DefaultMaxLen
		}
		s := &jsonschema.Schema{Type: "string", MaxLength: ptr(maxLen)}
		if f.Required {
			s.MinLength = ptr(1)
		}
		if f.Multiline {
			s.Description = "Text; line breaks allowed."
		}
		return s
	}
}

// AnswerSchema is the output schema of every tool, and the HTTP API's answer
// body: gateway.Answer.
func AnswerSchema() *jsonschema.Schema {
	str := func(desc string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: desc} }
	statuses := []any{gateway.StatusSucceeded, gateway.StatusFailedFinal, gateway.StatusConflict, gateway.StatusRejected,
		gateway.StatusPending, gateway.StatusUnavailable, gateway.StatusNotFound}
	var actions []any
	for _, a := range answer.NextActions() {
		actions = append(actions, string(a))
	}
	step := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
		"attempt": {Type: "integer"}, "kind": {Type: "string"}, "outcome": {Type: "string"},
		"error_code": {Type: "string"}, "note": {Type: "string"},
		"started_at": {Type: "string", Format: "date-time"}, "finished_at": {Type: "string", Format: "date-time"},
	}}
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"status":           {Type: "string", Enum: statuses, Description: "The outcome."},
			"operation_key":    str("<env>:<operation>:<intent_id>:<key_version>: pass it to get_operation."),
			"operation":        str("The operation type."),
			"replayed":         {Type: "boolean", Description: "true: answered with an outcome that already existed; nothing was sent again."},
			"target_system":    str("1c, crm or payments."),
			"target_object_id": str("The object the effect made in the target (invoice, task, payment)."),
			"error_code":       str("Safe, stable error code; empty when none."),
			"reason":           str("One sentence saying what happened and what to do."),
			"retry_after_ms":   {Type: "integer", Minimum: ptr(0.0), Description: "Wait this long before polling or retrying."},
			"next_action":      {Type: "string", Enum: actions, Description: nextActionHelp},
			"conflict_fields":  {Type: "array", Items: &jsonschema.Schema{Type: "string"}, Description: "Fields that differ from the first request for this intent."},
			"existing": {Type: "object", Required: []string{"status"},
				Description: "Conflict only: the outcome of the first request for this intent. Nothing ran for this request, but the first one may have made its effect (money moved).",
				Properties: map[string]*jsonschema.Schema{
					"status":           {Type: "string", Enum: []any{gateway.StatusSucceeded, gateway.StatusFailedFinal, gateway.StatusPending}},
					"target_object_id": str("The object the first request made."),
					"error_code":       str("The first request's error code."),
				}},
			"approval": {Type: "object", Required: []string{"expires_at"},
				Description: "While the intent waits for a person's approval (next_action await_approval): where a person decides and until when.",
				Properties: map[string]*jsonschema.Schema{
					"url":        str("A page that shows exactly what is approved; hand it to the user."),
					"expires_at": {Type: "string", Format: "date-time", Description: "No decision by then ends the intent approval_expired, nothing executed."},
					"approvers":  {Type: "integer", Minimum: ptr(1.0), Description: "Distinct approvers needed."},
					"approved":   {Type: "integer", Minimum: ptr(0.0), Description: "Approvals given so far."},
				}},
			"attempts":       {Type: "integer", Minimum: ptr(0.0)},
			"result":         {Type: "object", Description: "Normalised outcome: business status and safe details."},
			"journal_status": str("The journal's status (get_operation)."),
			"trail":          {Type: "array", Items: step, Description: "The attempts, oldest first (get_operation)."},
		},
		Required: []string{"status", "operation_key", "replayed", "target_object_id", "error_code", "reason", "retry_after_ms", "next_action"},
	}
}

// nextActionHelp is the next_action table in one paragraph, for the tools'
// descriptions and the output schema.
const nextActionHelp = "next_action: done = finished, the effect exists; " +
	"poll = not settled yet, call get_operation with operation_key after retry_after_ms; " +
	"await_approval = waits for a person's approval, nothing has run: hand approval.url to your user and call get_operation after retry_after_ms; " +
	"retry_same_intent = safe to call the same tool again with the same intent_id and fields; " +
	"fix_input = rejected before anything ran, fix the named field and call again; " +
	"new_intent_required = this intent_id already exists with other content, a changed request needs a new intent_id (and, for money, a new approval); " +
	"human_review = a person must look (an outcome the target could not confirm, or a final refusal)."

// ToolName is an operation type's tool: "payment.charge" → "payment_charge".
func ToolName(opType string) string { return strings.ReplaceAll(opType, ".", "_") }

// summaries are the first sentence of the built-in types' tools.
var summaries = map[string]string{
	operation.TypeInvoiceCreate: "Create an invoice in 1C (invoice.create).",
	operation.TypeInvoiceCancel: "Cancel an invoice in 1C with a cancelling document (invoice.cancel); the invoice stays, marked cancelled.",
	operation.TypeTaskCreate:    "Create a task in the CRM (crm.task.create).",
	operation.TypeDealCreate:    "Create a deal in the CRM (crm.deal.create).",
	operation.TypePaymentCharge: "Charge a payment through the payment provider (payment.charge). Moves money.",
	operation.TypePaymentRefund: "Refund a payment through the payment provider (payment.refund). Moves money.",
}

// movesMoney reports whether t moves money: it needs an approval, or its
// target is a payment provider.
func movesMoney(t operation.Type) bool { return t.RequiresApproval || t.TargetSystem == "payments" }

// description teaches the key discipline for one operation type.
func description(t operation.Type) string {
	first, ok := summaries[t.Name]
	if !ok {
		first = fmt.Sprintf("Run %s on the %s target.", t.Name, t.TargetSystem)
		if t.RequiresApproval {
			first += " Moves money."
		}
	}
	if movesMoney(t) {
		first += " A retry of this payment MUST reuse its intent_id: a call with a new intent_id is another payment, " +
			"even after a timeout, an error or a pending answer. It may wait for a person's approval (next_action await_approval): " +
			"hand the approval link to your user and poll with get_operation; never resend with a new intent_id."
	}
	return first + " idemgate makes at most one business effect per intent: give one intent_id per business intent and reuse it on every retry — " +
		"calling again with the same intent_id and fields is safe and returns the stored outcome (replayed: true); " +
		"changed fields under the same intent_id are refused as a conflict, nothing is executed. " +
		"Amounts are integer minor units (125000 = 1,250.00). " + nextActionHelp
}
