package process

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/operation"
)

// A payload template is a JSON value whose strings may hold ${ref}
// placeholders. A ref is one of
//
//	input.NAME                     a field of the process input
//	input.NAME.MEMBER              a member of an object field
//	steps.STEP.target_object_id    the object an earlier step made
//	steps.STEP.result.PATH         a member of its stored result (business_status, details.number, …)
//	process.intent_id, process.key, process.event_id
//
// A string that is exactly one placeholder takes the value's own JSON type
// (money stays an integer) and is left out of the payload when the value is
// absent (an optional input field not given); elsewhere values are written
// as text, an absent one as "". "$${" writes a literal "${".

// refKind is what a placeholder reads.
type refKind int

const (
	refInput refKind = iota + 1
	refObjectID
	refResult
	refIntent
	refKey
	refEventID
)

// ref is one parsed placeholder.
type ref struct {
	kind refKind
	// name is the input field (refInput) or the step (refObjectID,
	// refResult); path the object member or the result's members.
	name string
	path []string
	// step is the index of the step named (refObjectID, refResult).
	step int
	// src is the placeholder's text, for errors.
	src string
}

// part is a literal or a placeholder of a text.
type part struct {
	lit string
	ref *ref
}

// node is a compiled payload value.
type node struct {
	// One of: a literal JSON value (lit), a whole placeholder (whole), a
	// text with placeholders (text), an object (obj) or a list (list).
	lit   any
	whole *ref
	text  []part
	obj   map[string]*node
	keys  []string // obj's member names, sorted
	list  []*node
	isLit bool
}

func parseTemplateText(s string) ([]part, error) {
	var out []part
	var lit strings.Builder
	for s != "" {
		i := strings.Index(s, "${")
		if i < 0 {
			lit.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' { // "$${" is a literal "${"
			lit.WriteString(s[:i-1])
			lit.WriteString("${")
			s = s[i+2:]
			continue
		}
		lit.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, errors.New("unterminated ${")
		}
		r, err := parseRef(s[i+2 : i+end])
		if err != nil {
			return nil, err
		}
		if lit.Len() > 0 {
			out = append(out, part{lit: lit.String()})
			lit.Reset()
		}
		out = append(out, part{ref: r})
		s = s[i+end+1:]
	}
	if lit.Len() > 0 {
		out = append(out, part{lit: lit.String()})
	}
	return out, nil
}

func parseRef(s string) (*ref, error) {
	segs := strings.Split(s, ".")
	for _, seg := range segs {
		if seg == "" {
			return nil, fmt.Errorf("${%s}: empty name", s)
		}
	}
	r := &ref{src: "${" + s + "}"}
	switch {
	case segs[0] == "input" && (len(segs) == 2 || len(segs) == 3):
		r.kind, r.name, r.path = refInput, segs[1], segs[2:]
	case segs[0] == "steps" && len(segs) == 3 && segs[2] == "target_object_id":
		r.kind, r.name = refObjectID, segs[1]
	case segs[0] == "steps" && len(segs) >= 4 && segs[2] == "result":
		r.kind, r.name, r.path = refResult, segs[1], segs[3:]
	case s == "process.intent_id":
		r.kind = refIntent
	case s == "process.key":
		r.kind = refKey
	case s == "process.event_id":
		r.kind = refEventID
	default:
		return nil, fmt.Errorf("${%s}: want input.NAME, steps.STEP.target_object_id, steps.STEP.result.PATH, process.intent_id, process.key or process.event_id", s)
	}
	return r, nil
}

// compileValue compiles a payload value; refs receives every placeholder.
func compileValue(v any, refs *[]*ref) (*node, error) {
	switch t := v.(type) {
	case string:
		parts, err := parseTemplateText(t)
		if err != nil {
			return nil, err
		}
		switch {
		case len(parts) == 0:
			return &node{lit: "", isLit: true}, nil
		case len(parts) == 1 && parts[0].ref != nil:
			*refs = append(*refs, parts[0].ref)
			return &node{whole: parts[0].ref}, nil
		case len(parts) == 1:
			return &node{lit: parts[0].lit, isLit: true}, nil
		}
		for _, p := range parts {
			if p.ref != nil {
				*refs = append(*refs, p.ref)
			}
		}
		return &node{text: parts}, nil
	case map[string]any:
		n := &node{obj: make(map[string]*node, len(t))}
		for k, x := range t {
			c, err := compileValue(x, refs)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			n.obj[k] = c
			n.keys = append(n.keys, k)
		}
		sort.Strings(n.keys)
		return n, nil
	case []any:
		n := &node{list: make([]*node, len(t))}
		for i, x := range t {
			c, err := compileValue(x, refs)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			n.list[i] = c
		}
		return n, nil
	case nil, bool, json.Number:
		return &node{lit: t, isLit: true}, nil
	case int, int64, float64:
		return &node{lit: normalizeValue(t), isLit: true}, nil
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}

// StepResult is what a succeeded step left in the journal: the only step
// outputs a template may read.
type StepResult struct {
	TargetObjectID string
	// Result is the stored, normalised result (business_status, details).
	Result json.RawMessage
}

// Values are what a payload is built from: the process command's
// normalised input and identity, and the succeeded steps' results by name.
type Values struct {
	// Input holds the input fields, significant and not (Operation.Fields
	// and Extra), normalised.
	Input    map[string]any
	IntentID string
	Key      string
	EventID  string
	Steps    map[string]StepResult
}

// errAbsent marks a value that is not there (an optional field not given).
var errAbsent = errors.New("absent")

// resolve returns the value r reads.
func (v *Values) resolve(r *ref) (any, error) {
	switch r.kind {
	case refIntent:
		return v.IntentID, nil
	case refKey:
		return v.Key, nil
	case refEventID:
		return v.EventID, nil
	case refInput:
		x, ok := v.Input[r.name]
		if !ok {
			return nil, errAbsent
		}
		for _, m := range r.path {
			obj, ok := x.(map[string]any)
			if !ok {
				return nil, errAbsent
			}
			if x, ok = obj[m]; !ok {
				return nil, errAbsent
			}
		}
		return x, nil
	case refObjectID:
		s, ok := v.Steps[r.name]
		if !ok {
			return nil, fmt.Errorf("%s: step %s has not succeeded", r.src, r.name)
		}
		if s.TargetObjectID == "" {
			return nil, errAbsent
		}
		return s.TargetObjectID, nil
	case refResult:
		s, ok := v.Steps[r.name]
		if !ok {
			return nil, fmt.Errorf("%s: step %s has not succeeded", r.src, r.name)
		}
		if len(s.Result) == 0 {
			return nil, errAbsent
		}
		dec := json.NewDecoder(bytes.NewReader(s.Result))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return nil, fmt.Errorf("%s: the stored result of step %s is not JSON", r.src, r.name)
		}
		for _, m := range r.path {
			obj, ok := x.(map[string]any)
			if !ok {
				return nil, errAbsent
			}
			if x, ok = obj[m]; !ok {
				return nil, errAbsent
			}
		}
		return x, nil
	}
	return nil, fmt.Errorf("%s: unknown placeholder", r.src)
}

// build evaluates n; ok is false for a whole placeholder whose value is
// absent (the member is left out).
func (n *node) build(v *Values) (out any, ok bool, err error) {
	switch {
	case n.isLit:
		return n.lit, true, nil
	case n.whole != nil:
		x, err := v.resolve(n.whole)
		if errors.Is(err, errAbsent) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return jsonValue(x), true, nil
	case n.text != nil:
		var b strings.Builder
		for _, p := range n.text {
			if p.ref == nil {
				b.WriteString(p.lit)
				continue
			}
			x, err := v.resolve(p.ref)
			if errors.Is(err, errAbsent) {
				continue
			}
			if err != nil {
				return nil, false, err
			}
			s, err := textOf(x)
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", p.ref.src, err)
			}
			b.WriteString(s)
		}
		return b.String(), true, nil
	case n.obj != nil:
		m := make(map[string]any, len(n.keys))
		for _, k := range n.keys {
			x, ok, err := n.obj[k].build(v)
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", k, err)
			}
			if ok {
				m[k] = x
			}
		}
		return m, true, nil
	case n.list != nil:
		l := make([]any, 0, len(n.list))
		for i, c := range n.list {
			x, ok, err := c.build(v)
			if err != nil {
				return nil, false, fmt.Errorf("[%d]: %w", i, err)
			}
			if ok {
				l = append(l, x)
			}
		}
		return l, true, nil
	}
	return nil, false, errors.New("empty template node")
}

// jsonValue turns a normalised field value into the JSON value a payload
// carries: a time as RFC 3339 in UTC, the rest as they are.
func jsonValue(x any) any {
	switch t := x.(type) {
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, y := range t {
			m[k] = jsonValue(y)
		}
		return m
	}
	return x
}

// textOf writes a scalar value as text.
func textOf(x any) (string, error) {
	switch t := x.(type) {
	case string:
		return t, nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case int:
		return strconv.Itoa(t), nil
	case json.Number:
		return t.String(), nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(t), nil
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano), nil
	}
	return "", fmt.Errorf("a %T cannot be written into text", x)
}

// valueKind is the kind of JSON value a placeholder yields, for the checks
// at start: a field kind for input fields, KindString for object ids and
// the process's identity, 0 when unknown until run time (a result member).
func (r *ref) valueKind(input operation.Type) operation.FieldKind {
	switch r.kind {
	case refInput:
		f, _ := input.Field(r.name)
		if len(r.path) == 0 {
			return f.Kind
		}
		for _, m := range f.Fields {
			if m.Name == r.path[0] {
				return m.Kind
			}
		}
		return 0
	case refObjectID, refIntent, refKey, refEventID:
		return operation.KindString
	}
	return 0
}

// accepts reports whether a field of kind want takes a value of kind have
// (0: unknown until run time; the decoder judges it then).
func accepts(want, have operation.FieldKind) bool {
	if have == 0 || want == have {
		return true
	}
	str := []operation.FieldKind{operation.KindString, operation.KindCurrency, operation.KindDate, operation.KindTime, operation.KindEnum}
	switch want {
	case operation.KindString:
		return slices.Contains(str, have)
	case operation.KindMoney, operation.KindInt:
		return have == operation.KindMoney || have == operation.KindInt
	case operation.KindCurrency, operation.KindDate, operation.KindTime, operation.KindEnum:
		return have == operation.KindString || have == operation.KindEnum
	}
	return false
}
