package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// ErrInvalid wraps every error of a declaration that cannot run: the daemon
// refuses to start with it (exit 78).
var ErrInvalid = errors.New("invalid process")

// OperationPrefix begins the operation name of every process: its commands
// travel as operation "process.<name>", its key is
// <env>:process.<name>:<intent>:<version>. No operation type may use it.
const OperationPrefix = wire.ProcessOperationPrefix

// TargetSystem is the target system of a process's input type.
const TargetSystem = "process"

// MaxStepNameLen bounds a step's name.
const MaxStepNameLen = 32

// Definition is a compiled, checked process.
type Definition struct {
	// Name is the process's name ("order.checkout"); Operation its
	// operation name ("process.order.checkout").
	Name      string
	Operation string
	// Input is the process command's type: its fields validate and
	// fingerprint the input.
	Input operation.Type
	Steps []Step
	// Digest identifies the declaration (Encode); Body is the form the
	// journal keeps.
	Digest string
	Body   []byte
}

// Step is one compiled step.
type Step struct {
	Name   string
	Action Action
	// Compensation is nil for a step that is not undone.
	Compensation *Action
}

// Action is a compiled step or compensation: the command the coordinator
// sends.
type Action struct {
	Operation string
	// Type is the operation type as registered when the definition was
	// compiled.
	Type       operation.Type
	payload    *node
	approvalID *node
}

// Compile checks the declaration of process name against the operation
// types in reg and compiles it. Every problem is reported, each naming the
// configuration key at fault: an ill-formed name or input, an unknown
// operation type (step or compensation), a payload member the type does
// not have or a required one missing, a placeholder naming an unknown input
// field or step, a step's own or a later step's result (a forward
// reference: steps run in order, so it would wait on itself), a value of
// the wrong kind.
func Compile(name string, d Decl, reg *operation.Registry) (*Definition, error) {
	where := "processes." + name
	opName := OperationPrefix + name
	if err := operation.ValidateOperationName(name); err != nil {
		return nil, fmt.Errorf("%w: %s: name: %w", ErrInvalid, where, err)
	}
	if err := operation.ValidateOperationName(opName); err != nil {
		return nil, fmt.Errorf("%w: %s: the operation name %s: %w", ErrInvalid, where, opName, err)
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if len(d.Steps) == 0 {
		fail("%s.steps: a process has at least one step", where)
	}
	approval := false
	for _, s := range d.Steps {
		for _, a := range []*ActionDecl{&s.ActionDecl, s.Compensate} {
			if a != nil {
				if t, ok := reg.Lookup(a.Operation); ok && t.RequiresApproval {
					approval = true
				}
			}
		}
	}
	input, err := operation.TypeDecl{TargetSystem: TargetSystem, ApprovalIDRequired: approval, Fields: d.Input.Fields}.Type(opName)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: %s.input: %w", ErrInvalid, where, err))
	}
	def := &Definition{Name: name, Operation: opName, Input: input}
	index := map[string]int{}
	for i, s := range d.Steps {
		at := fmt.Sprintf("%s.steps[%d]", where, i)
		if s.Name != "" {
			at = where + ".steps." + s.Name
		}
		if !validStepName(s.Name) {
			fail("%s: the step name must be [a-z][a-z0-9_]*, at most %d bytes", at, MaxStepNameLen)
		} else if _, dup := index[s.Name]; dup {
			fail("%s: two steps are named %s", at, s.Name)
		}
		index[s.Name] = i
		step := Step{Name: s.Name}
		act, stepErrs := compileAction(at, s.ActionDecl, reg, input, d.Steps, i, false)
		errs = append(errs, stepErrs...)
		step.Action = act
		if s.Compensate != nil {
			comp, compErrs := compileAction(at+".compensate", *s.Compensate, reg, input, d.Steps, i, true)
			errs = append(errs, compErrs...)
			step.Compensation = &comp
		}
		def.Steps = append(def.Steps, step)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	def.Body, def.Digest, err = Encode(name, d)
	if err != nil {
		return nil, err
	}
	return def, nil
}

func validStepName(s string) bool {
	if s == "" || len(s) > MaxStepNameLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// compileAction compiles the step (or, with comp, the compensation) of
// steps[at] and checks it.
func compileAction(where string, a ActionDecl, reg *operation.Registry, input operation.Type, steps []StepDecl, at int, comp bool) (Action, []error) {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	what := "the step's"
	if comp {
		what = "the compensation's"
	}
	typ, ok := reg.Lookup(a.Operation)
	switch {
	case a.Operation == "":
		fail("%s.operation: required", where)
		return Action{}, errs
	case strings.HasPrefix(a.Operation, OperationPrefix):
		fail("%s.operation: %s is a process; a step is one operation (processes do not nest)", where, a.Operation)
		return Action{}, errs
	case !ok:
		fail("%s.operation: %s operation type %s does not exist (known: %s)", where, what, a.Operation, strings.Join(reg.Names(), ", "))
		return Action{}, errs
	}
	act := Action{Operation: a.Operation, Type: typ}
	var refs []*ref
	payload := a.Payload
	if payload == nil {
		payload = map[string]any{}
	}
	n, err := compileValue(normalizeValue(payload), &refs)
	if err != nil {
		fail("%s.payload: %v", where, err)
		return act, errs
	}
	act.payload = n
	// Members: each a field of the type, every required field given, the
	// kinds of whole placeholders agreeing with the field's.
	for _, k := range n.keys {
		f, ok := typ.Field(k)
		if !ok {
			fail("%s.payload.%s: %s has no field %s", where, k, a.Operation, k)
			continue
		}
		if w := n.obj[k].whole; w != nil && input.Name != "" {
			if have := w.valueKind(input); !accepts(f.Kind, have) {
				fail("%s.payload.%s: %s is a %s, the field is a %s", where, k, w.src, have, f.Kind)
			}
		}
		if n.obj[k].text != nil && f.Kind != operation.KindString {
			fail("%s.payload.%s: text with placeholders makes a string, the field is a %s", where, k, f.Kind)
		}
	}
	for _, f := range typ.Fields {
		if _, ok := n.obj[f.Name]; f.Required && !ok {
			fail("%s.payload.%s: required by %s", where, f.Name, a.Operation)
		}
	}
	if a.ApprovalID != "" {
		var arefs []*ref
		an, err := compileValue(a.ApprovalID, &arefs)
		if err != nil {
			fail("%s.approval_id: %v", where, err)
		} else {
			act.approvalID = an
			refs = append(refs, arefs...)
		}
	}
	// Placeholders: a known input field, an earlier step (or, for a
	// compensation, its own step or an earlier one).
	for _, r := range refs {
		switch r.kind {
		case refInput:
			f, ok := input.Field(r.name)
			if input.Name != "" && !ok {
				fail("%s: %s names input field %s, which the input does not declare", where, r.src, r.name)
				continue
			}
			if len(r.path) > 0 && ok {
				found := false
				for _, m := range f.Fields {
					found = found || m.Name == r.path[0]
				}
				if !found {
					fail("%s: %s names member %s, which input field %s does not declare", where, r.src, r.path[0], r.name)
				}
			}
		case refObjectID, refResult:
			j := -1
			for i, s := range steps {
				if s.Name == r.name {
					j = i
				}
			}
			switch {
			case j < 0:
				fail("%s: %s names step %s, which the process does not have", where, r.src, r.name)
			case j == at && !comp:
				fail("%s: %s is the step's own result: a step cannot wait on itself (a cycle)", where, r.src)
			case j > at:
				fail("%s: %s names step %s, which runs later: a payload reads only the steps before it (a forward reference)", where, r.src, r.name)
			}
			r.step = j
		}
	}
	return act, errs
}

// Build makes the action's command payload (JSON) and approval id from
// v. An error says which placeholder could not be filled.
func (a *Action) Build(v *Values, processApproval string) (payload json.RawMessage, approvalID string, err error) {
	x, _, err := a.payload.build(v)
	if err != nil {
		return nil, "", err
	}
	payload, err = json.Marshal(x)
	if err != nil {
		return nil, "", err
	}
	switch {
	case a.approvalID != nil:
		y, ok, err := a.approvalID.build(v)
		if err != nil {
			return nil, "", fmt.Errorf("approval_id: %w", err)
		}
		if ok {
			approvalID, _ = y.(string)
		}
	case a.Type.RequiresApproval:
		approvalID = processApproval
	}
	return payload, approvalID, nil
}

// Uses names the operation types the definition sends, steps and
// compensations, sorted, each once.
func (d *Definition) Uses() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range d.Steps {
		for _, a := range []*Action{&s.Action, s.Compensation} {
			if a != nil && !seen[a.Operation] {
				seen[a.Operation] = true
				out = append(out, a.Operation)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Step returns the index of the named step, or -1.
func (d *Definition) Step(name string) int {
	for i, s := range d.Steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}
