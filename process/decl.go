package process

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/idemgate/idemgate/operation"
)

// Decl declares a process in configuration (processes.<name> in the
// daemon's file). The struct tags are the configuration keys; the json tags
// are the form the journal keeps by digest.
//
//	processes:
//	  order.checkout:
//	    input:
//	      fields:
//	        - {name: order_id, kind: string, required: true}
//	        - {name: amount_minor, kind: money, required: true}
//	        …
//	    steps:
//	      - name: invoice
//	        operation: invoice.create
//	        payload: {order_id: "${input.order_id}", amount_minor: "${input.amount_minor}", …}
//	        compensate:
//	          operation: invoice.cancel
//	          payload: {invoice_id: "${steps.invoice.target_object_id}"}
//	      - name: charge
//	        …
type Decl struct {
	// Input declares the process command's payload: validated, normalised
	// and fingerprinted like an operation type's (operation.FieldDecl).
	Input InputDecl `mapstructure:"input" json:"input"`
	// Steps run in order; each starts once the one before it succeeded.
	Steps []StepDecl `mapstructure:"steps" json:"steps"`
}

// InputDecl is a process's input.
type InputDecl struct {
	Fields []operation.FieldDecl `mapstructure:"fields" json:"fields"`
}

// StepDecl declares one step.
type StepDecl struct {
	// Name is the step's name, [a-z][a-z0-9_]* of at most 32 bytes, unique
	// in the process; it ends the step's key and names its results in
	// templates (steps.<name>.…).
	Name string `mapstructure:"name" json:"name"`
	// ActionDecl is what the step does.
	ActionDecl `mapstructure:",squash"`
	// Compensate, when set, undoes the step's effect by a new operation
	// after a later step failed finally. Without it the step is left as
	// it is (a notice sent, a task that does no harm).
	Compensate *ActionDecl `mapstructure:"compensate" json:"compensate,omitempty"`
}

// ActionDecl is one operation a process sends: a step or a compensation.
type ActionDecl struct {
	// Operation is a registered operation type.
	Operation string `mapstructure:"operation" json:"operation"`
	// Payload is the command's payload: JSON values whose strings may hold
	// ${ref} placeholders (template.go).
	Payload map[string]any `mapstructure:"payload" json:"payload"`
	// ApprovalID is a template for the command's approval_id. Default: the
	// process command's approval_id, for a type that needs one.
	ApprovalID string `mapstructure:"approval_id" json:"approval_id,omitempty"`
}

// declDoc is what a definition's digest covers and the journal keeps: the
// name and the declaration.
type declDoc struct {
	Name string `json:"name"`
	Decl Decl   `json:"decl"`
}

// Encode returns the form of the declaration of process name that the
// journal keeps, and its digest: the hex SHA-256 of that form. Map members
// are written in sorted order, so one declaration has one digest.
func Encode(name string, d Decl) (body []byte, digest string, err error) {
	body, err = json.Marshal(declDoc{Name: name, Decl: normalizeDecl(d)})
	if err != nil {
		return nil, "", fmt.Errorf("%w: processes.%s: %w", ErrInvalid, name, err)
	}
	sum := sha256.Sum256(body)
	return body, hex.EncodeToString(sum[:]), nil
}

// Parse reads a declaration the journal kept (Encode's body).
func Parse(body []byte) (name string, d Decl, err error) {
	var doc declDoc
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return "", Decl{}, fmt.Errorf("%w: stored process definition: %w", ErrInvalid, err)
	}
	return doc.Name, doc.Decl, nil
}

// normalizeDecl turns the values a configuration reader produced (YAML
// integers, map[any]any) into JSON's, so that the digest depends on the
// declaration only.
func normalizeDecl(d Decl) Decl {
	out := Decl{Input: d.Input, Steps: make([]StepDecl, len(d.Steps))}
	for i, s := range d.Steps {
		s.ActionDecl = normalizeAction(s.ActionDecl)
		if s.Compensate != nil {
			c := normalizeAction(*s.Compensate)
			s.Compensate = &c
		}
		out.Steps[i] = s
	}
	return out
}

func normalizeAction(a ActionDecl) ActionDecl {
	if a.Payload != nil {
		a.Payload = normalizeValue(a.Payload).(map[string]any)
	}
	return a
}

func normalizeValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = normalizeValue(x)
		}
		return m
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = normalizeValue(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = normalizeValue(x)
		}
		return l
	case int:
		return json.Number(fmt.Sprint(t))
	case int64:
		return json.Number(fmt.Sprint(t))
	case uint64:
		return json.Number(fmt.Sprint(t))
	case float64:
		b, _ := json.Marshal(t)
		return json.Number(b)
	}
	return v
}
