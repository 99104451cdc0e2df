package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A body template is compiled once into an ordered tree (members keep the
// order the declaration wrote them in) and rendered per call by appending
// JSON to one buffer: no maps, no reflection, no key sorting.

// jObject is an object node; its values are nodes.
type jObject struct {
	names []string
	vals  []any
}

// jArray is an array node.
type jArray []any

// jLiteral is a JSON literal (number, true, false, null) as written.
type jLiteral string

// bodyTemplate is a compiled body.
type bodyTemplate struct{ root *jObject }

// parseBodyText compiles a JSON object template.
func parseBodyText(s string) (bodyTemplate, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	n, err := parseOrdered(dec, 0)
	if err != nil {
		return bodyTemplate{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return bodyTemplate{}, errors.New("more than one JSON value")
	}
	root, ok := n.(*jObject)
	if !ok {
		return bodyTemplate{}, errors.New("must be a JSON object")
	}
	return bodyTemplate{root: root}, nil
}

func parseOrdered(dec *json.Decoder, depth int) (any, error) {
	if depth > maxBodyDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxBodyDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jObject{}
			for dec.More() {
				nt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("not JSON: %w", err)
				}
				name, _ := nt.(string)
				for _, n := range o.names {
					if n == name {
						return nil, fmt.Errorf("member %q written twice", name)
					}
				}
				v, err := parseOrdered(dec, depth+1)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				o.names, o.vals = append(o.names, name), append(o.vals, v)
			}
			_, err := dec.Token() // }
			return o, err
		case '[':
			var a jArray
			for dec.More() {
				v, err := parseOrdered(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ]
			return a, err
		}
	case string:
		return parseText(t)
	case json.Number:
		return jLiteral(t), nil
	case bool:
		return jLiteral(strconv.FormatBool(t)), nil
	case nil:
		return jLiteral("null"), nil
	}
	return nil, errors.New("unexpected JSON token")
}

// setKey makes the member at the dotted path the ${key} placeholder,
// creating objects on the way; an existing member on the way that is not
// an object is an error.
func (b bodyTemplate) setKey(path string) error {
	o := b.root
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		i := o.index(p)
		if i < 0 {
			next := &jObject{}
			o.names, o.vals = append(o.names, p), append(o.vals, next)
			o = next
			continue
		}
		next, ok := o.vals[i].(*jObject)
		if !ok {
			return fmt.Errorf("key.name %s crosses the body member %s, which is not an object", path, p)
		}
		o = next
	}
	last := parts[len(parts)-1]
	key := text{{ref: &ref{name: "key"}}}
	if i := o.index(last); i >= 0 {
		o.vals[i] = key
	} else {
		o.names, o.vals = append(o.names, last), append(o.vals, key)
	}
	return nil
}

func (o *jObject) index(name string) int {
	for i, n := range o.names {
		if n == name {
			return i
		}
	}
	return -1
}

func (b bodyTemplate) refs() []*ref {
	var out []*ref
	var walk func(any)
	walk = func(n any) {
		switch x := n.(type) {
		case text:
			out = append(out, x.refs()...)
		case *jObject:
			for _, e := range x.vals {
				walk(e)
			}
		case jArray:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(b.root)
	return out
}

// render appends the body's JSON for c to buf.
func (b bodyTemplate) render(buf []byte, c *call) []byte {
	buf, _ = appendNode(buf, b.root, c)
	return buf
}

// appendNode appends a node; ok false (and buf unchanged) for a lone
// placeholder whose value is absent, which leaves its member out.
func appendNode(buf []byte, n any, c *call) ([]byte, bool) {
	switch x := n.(type) {
	case text:
		if r := x.single(); r != nil {
			v, ok := c.value(r)
			if !ok {
				return buf, false
			}
			return appendValue(buf, v), true
		}
		return appendString(buf, x.render(c, nil)), true
	case *jObject:
		buf = append(buf, '{')
		first := true
		for i, name := range x.names {
			mark := len(buf)
			if !first {
				buf = append(buf, ',')
			}
			buf = appendString(buf, name)
			buf = append(buf, ':')
			var ok bool
			if buf, ok = appendNode(buf, x.vals[i], c); !ok {
				buf = buf[:mark]
				continue
			}
			first = false
		}
		return append(buf, '}'), true
	case jArray:
		buf = append(buf, '[')
		first := true
		for _, e := range x {
			mark := len(buf)
			if !first {
				buf = append(buf, ',')
			}
			var ok bool
			if buf, ok = appendNode(buf, e, c); !ok {
				buf = buf[:mark]
				continue
			}
			first = false
		}
		return append(buf, ']'), true
	case jLiteral:
		return append(buf, x...), true
	}
	return append(buf, "null"...), true
}

// appendValue appends a placeholder's value in its JSON type.
func appendValue(buf []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return appendString(buf, x)
	case int64:
		return strconv.AppendInt(buf, x, 10)
	case bool:
		return strconv.AppendBool(buf, x)
	}
	b, err := json.Marshal(v) // an object field's members
	if err != nil {
		return append(buf, "null"...)
	}
	return append(buf, b...)
}

// appendString appends s as a JSON string (invalid UTF-8 replaced).
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\r':
				buf = append(buf, '\\', 'r')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20 || c == 0x7f:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				buf = append(buf, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, `\ufffd`...)
		} else {
			buf = append(buf, s[i:i+size]...)
		}
		i += size
	}
	return append(buf, '"')
}
