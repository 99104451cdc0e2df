package operation

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of arrays and objects, so that hostile input
// cannot exhaust the stack. It matches encoding/json and gowebpki/jcs.
const maxJSONDepth = 10000

// jsonKind is the type of a parsed JSON value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is one parsed JSON value. Numbers keep their literal text, so that
// an integer is never rounded through float64 before it is checked. Object
// members keep their document order.
type jsonValue struct {
	kind    jsonKind
	b       bool
	text    string // decoded string, or the number literal
	elems   []jsonValue
	members []jsonMember
}

type jsonMember struct {
	name  string
	value jsonValue
}

// kindName names a value's JSON type for error messages.
func (v jsonValue) kindName() string {
	switch v.kind {
	case jsonNull:
		return "null"
	case jsonBool:
		return "boolean"
	case jsonNumber:
		return "number"
	case jsonString:
		return "string"
	case jsonArray:
		return "array"
	default:
		return "object"
	}
}

// SyntaxError reports malformed JSON: bad grammar, invalid UTF-8, a lone
// surrogate, a duplicate member name or excessive nesting. Msg never quotes
// the input, which may hold secrets. It matches ErrNotJSON with errors.Is.
type SyntaxError struct {
	// Offset is the byte offset at which the problem was found.
	Offset int
	// Msg says what was wrong.
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Is reports whether target is ErrNotJSON.
func (e *SyntaxError) Is(target error) bool { return target == ErrNotJSON }

// jsonParser is a strict RFC 8259 parser (I-JSON rules for strings: valid
// UTF-8, no lone surrogates).
type jsonParser struct {
	data      []byte
	pos       int
	depth     int
	rejectDup bool
}

// parseJSON parses exactly one JSON value surrounded by optional whitespace.
// With rejectDup, an object with two members of the same name is an error;
// without it, duplicates are kept for the caller to report precisely.
func parseJSON(data []byte, rejectDup bool) (jsonValue, error) {
	p := &jsonParser{data: data, rejectDup: rejectDup}
	p.skipWS()
	if p.pos >= len(p.data) {
		return jsonValue{}, p.errf("no JSON value")
	}
	v, err := p.value()
	if err != nil {
		return jsonValue{}, err
	}
	p.skipWS()
	if p.pos != len(p.data) {
		return jsonValue{}, p.errf("unexpected data after the JSON value")
	}
	return v, nil
}

func (p *jsonParser) errf(format string, args ...any) error {
	return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *jsonParser) skipWS() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (jsonValue, error) {
	if p.pos >= len(p.data) {
		return jsonValue{}, p.errf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		return jsonValue{kind: jsonString, text: s}, err
	case c == 't':
		return jsonValue{kind: jsonBool, b: true}, p.literal("true")
	case c == 'f':
		return jsonValue{kind: jsonBool}, p.literal("false")
	case c == 'n':
		return jsonValue{kind: jsonNull}, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return jsonValue{}, p.errf("unexpected character, want a JSON value")
	}
}

func (p *jsonParser) literal(lit string) error {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return p.errf("invalid literal, want %s", lit)
	}
	p.pos += len(lit)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *jsonParser) digits() int {
	start := p.pos
	for p.pos < len(p.data) && isDigit(p.data[p.pos]) {
		p.pos++
	}
	return p.pos - start
}

func (p *jsonParser) number() (jsonValue, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos >= len(p.data):
		return jsonValue{}, p.errf("incomplete number")
	case p.data[p.pos] == '0':
		p.pos++
	case isDigit(p.data[p.pos]):
		p.digits()
	default:
		return jsonValue{}, p.errf("invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return jsonValue{}, p.errf("invalid number: no digits after the decimal point")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return jsonValue{}, p.errf("invalid number: no digits in the exponent")
		}
	}
	return jsonValue{kind: jsonNumber, text: string(p.data[start:p.pos])}, nil
}

func hexVal(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// hex4 reads the four hex digits of a \u escape at p.pos.
func (p *jsonParser) hex4() (rune, error) {
	if len(p.data)-p.pos < 4 {
		return 0, p.errf("incomplete \\u escape")
	}
	var r rune
	for i := 0; i < 4; i++ {
		v, ok := hexVal(p.data[p.pos+i])
		if !ok {
			return 0, p.errf("invalid \\u escape")
		}
		r = r<<4 | v
	}
	p.pos += 4
	return r, nil
}

// str parses a string starting at the opening quote and returns its decoded
// UTF-8 value.
func (p *jsonParser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		p.pos++
	}
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, p.data[start:p.pos]...)
	for {
		if p.pos >= len(p.data) {
			return "", p.errf("unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errf("unescaped control character in string")
		case c < 0x80 && c != '\\':
			buf = append(buf, c)
			p.pos++
		case c >= 0x80:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errf("invalid UTF-8 in string")
			}
			buf = append(buf, p.data[p.pos:p.pos+size]...)
			p.pos += size
		default: // backslash
			p.pos++
			if p.pos >= len(p.data) {
				return "", p.errf("unterminated escape")
			}
			e := p.data[p.pos]
			p.pos++
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return "", p.errf("lone low surrogate in \\u escape")
				case r >= 0xD800 && r <= 0xDBFF:
					if len(p.data)-p.pos < 2 || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
						return "", p.errf("lone high surrogate in \\u escape")
					}
					p.pos += 2
					lo, err := p.hex4()
					if err != nil {
						return "", err
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return "", p.errf("high surrogate not followed by a low surrogate")
					}
					r = utf16.DecodeRune(r, lo)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", p.errf("invalid escape in string")
			}
		}
	}
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return p.errf("nesting deeper than %d", maxJSONDepth)
	}
	return nil
}

func (p *jsonParser) array() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // [
	v := jsonValue{kind: jsonArray}
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipWS()
		e, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		v.elems = append(v.elems, e)
		p.skipWS()
		if p.pos >= len(p.data) {
			return jsonValue{}, p.errf("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return jsonValue{}, p.errf("want ',' or ']' in array")
		}
	}
}

func (p *jsonParser) object() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	v := jsonValue{kind: jsonObject}
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	var seen map[string]struct{}
	if p.rejectDup {
		seen = make(map[string]struct{})
	}
	for {
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return jsonValue{}, p.errf("want a member name string")
		}
		namePos := p.pos
		name, err := p.str()
		if err != nil {
			return jsonValue{}, err
		}
		if p.rejectDup {
			if _, dup := seen[name]; dup {
				return jsonValue{}, &SyntaxError{Offset: namePos, Msg: "duplicate member name"}
			}
			seen[name] = struct{}{}
		}
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return jsonValue{}, p.errf("want ':' after member name")
		}
		p.pos++
		p.skipWS()
		val, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		v.members = append(v.members, jsonMember{name: name, value: val})
		p.skipWS()
		if p.pos >= len(p.data) {
			return jsonValue{}, p.errf("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return jsonValue{}, p.errf("want ',' or '}' in object")
		}
	}
}
