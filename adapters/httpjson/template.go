package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// A template is text holding ${ref} placeholders, or (in a body) any JSON
// value whose strings do. A ref is one of
//
//	key            the operation key as the target takes it (max_key_len)
//	marker         "[op:<key>]", for a free-text field a lookup can search
//	operation_key  the whole operation key
//	intent_id, event_id, operation, approval_id
//	payload.NAME   a payload field; payload.NAME.MEMBER a member of an
//	               object field
//
// optionally followed by "|decimal" (money in minor units as "1250.00").
// A body string that is exactly one placeholder takes the field's JSON
// type (an integer stays a number, an object an object) and is left out
// when the field is absent; elsewhere the value is written as text.

// ref is one parsed placeholder.
type ref struct {
	name    string   // key, marker, operation_key, intent_id, event_id, operation, approval_id, payload
	path    []string // payload field (and member) names
	decimal bool
}

// part is a literal or a placeholder of a text template.
type part struct {
	lit string
	ref *ref
}

// text is a parsed text template.
type text []part

var specialRefs = []string{"key", "marker", "operation_key", "intent_id", "event_id", "operation", "approval_id"}

// parseText parses s. Errors name the problem, not the whole text.
func parseText(s string) (text, error) {
	var out text
	for s != "" {
		i := strings.Index(s, "${")
		if i < 0 {
			out = append(out, part{lit: s})
			break
		}
		if i > 0 {
			out = append(out, part{lit: s[:i]})
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, errors.New("unterminated ${")
		}
		r, err := parseRef(s[i+2 : i+end])
		if err != nil {
			return nil, err
		}
		out = append(out, part{ref: r})
		s = s[i+end+1:]
	}
	return out, nil
}

func parseRef(s string) (*ref, error) {
	r := &ref{}
	if body, ok := strings.CutSuffix(s, "|decimal"); ok {
		r.decimal, s = true, body
	}
	if strings.Contains(s, "|") {
		return nil, fmt.Errorf("${%s}: the only format is |decimal", s)
	}
	if slices.Contains(specialRefs, s) {
		if r.decimal {
			return nil, fmt.Errorf("${%s|decimal}: |decimal formats a money field", s)
		}
		r.name = s
		return r, nil
	}
	rest, ok := strings.CutPrefix(s, "payload.")
	if !ok {
		return nil, fmt.Errorf("${%s}: unknown reference (payload.<field> or one of %s)", s, strings.Join(specialRefs, ", "))
	}
	r.name, r.path = "payload", strings.Split(rest, ".")
	for _, p := range r.path {
		if p == "" {
			return nil, fmt.Errorf("${%s}: empty field name", s)
		}
	}
	return r, nil
}

// refs returns the placeholders of t.
func (t text) refs() []*ref {
	var out []*ref
	for _, p := range t {
		if p.ref != nil {
			out = append(out, p.ref)
		}
	}
	return out
}

// single reports whether t is exactly one placeholder.
func (t text) single() *ref {
	if len(t) == 1 && t[0].ref != nil {
		return t[0].ref
	}
	return nil
}

// call is what a template is rendered with.
type call struct {
	op  operation.Operation
	key string // the target key
}

// value returns the placeholder's value: a string, int64, bool or
// map[string]any (times as canonical RFC 3339 text); ok false when absent.
func (c *call) value(r *ref) (any, bool) {
	switch r.name {
	case "key":
		return c.key, true
	case "marker":
		return adapters.Marker(c.key), true
	case "operation_key":
		return c.op.Key.String(), true
	case "intent_id":
		return c.op.Key.IntentID, true
	case "event_id":
		return c.op.EventID, c.op.EventID != ""
	case "operation":
		return c.op.Type, true
	case "approval_id":
		return c.op.ApprovalID, c.op.ApprovalID != ""
	}
	v, ok := c.op.Value(r.path[0])
	for _, p := range r.path[1:] {
		m, isMap := v.(map[string]any)
		if !ok || !isMap {
			return nil, false
		}
		v, ok = m[p]
	}
	if !ok {
		return nil, false
	}
	switch x := v.(type) {
	case time.Time:
		v = x.UTC().Format(time.RFC3339Nano)
	case int64:
		if r.decimal {
			v = adapters.FormatMinor(x)
		}
	}
	return v, true
}

// textOf writes a value as text.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// render writes t; escape (nil: none) is applied to each value.
func (t text) render(c *call, escape func(string) string) string {
	var b strings.Builder
	for _, p := range t {
		if p.ref == nil {
			b.WriteString(p.lit)
			continue
		}
		v, ok := c.value(p.ref)
		if !ok {
			continue
		}
		s := textOf(v)
		if escape != nil {
			s = escape(s)
		}
		b.WriteString(s)
	}
	return b.String()
}

// urlTemplate is a URL whose placeholder values are path-escaped (query
// values query-escaped).
type urlTemplate struct {
	path, query text
}

func parseURL(s string) (urlTemplate, error) {
	p, q, _ := strings.Cut(s, "?")
	pt, err := parseText(p)
	if err != nil {
		return urlTemplate{}, err
	}
	qt, err := parseText(q)
	if err != nil {
		return urlTemplate{}, err
	}
	return urlTemplate{path: pt, query: qt}, nil
}

func (u urlTemplate) refs() []*ref { return append(u.path.refs(), u.query.refs()...) }

func (u urlTemplate) render(c *call) string {
	s := u.path.render(c, url.PathEscape)
	if len(u.query) > 0 {
		s += "?" + u.query.render(c, url.QueryEscape)
	}
	return s
}

const maxBodyDepth = 16
