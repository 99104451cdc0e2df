package operation

// A hand-written JSON scanner, because every command passes through it and
// the standard library's way costs five times as much. Decode scans a body
// once into flat member lists (no tree, no maps, no per-field strings),
// copies the strings an Operation keeps into one arena and writes the
// RFC 8785 form straight from the normalised values; the alternative —
// encoding/json with DisallowUnknownFields and UseNumber, then
// gowebpki/jcs over the re-marshalled payload — gives the same fingerprint
// but not the strictness (duplicate members, I-JSON strings) and is
// measured beside it:
//
//	go test -run '^$' -bench Decode -benchmem -count 5 ./operation/
//	(the payment.charge test vector of example_test.go, 2 shared cores, ranges of 5 runs)
//	BenchmarkDecode            2.6–5.8 µs/op    536 B/op    8 allocs/op
//	BenchmarkDecodeReference   3.6–7.5 µs/op    544 B/op   12 allocs/op
//	BenchmarkDecodeStdlib     14.4–21.3 µs/op  5409 B/op  112 allocs/op
//
// (Reference: encoding/json into Command plus SHA-256 of the raw payload,
// no checks at all — the floor of any encoding/json decoder; Decode is
// below it.) The grammar and error texts match the reference tree parser
// the tests keep (reference_test.go), which FuzzCanonicalize holds to
// gowebpki/jcs and FuzzDecode holds Decode's fingerprints to.

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of arrays and objects, so that hostile input
// cannot exhaust the stack. It matches encoding/json and gowebpki/jcs.
const maxJSONDepth = 10000

var nestingMsg = "nesting deeper than " + strconv.Itoa(maxJSONDepth)

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

// kindName names a scanned value's JSON type for error messages.
func (v flatValue) kindName() string { return v.kind.String() }

func (k jsonKind) String() string {
	switch k {
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

// jsonParser is a strict RFC 8259 scanner (I-JSON rules for strings: valid
// UTF-8, no lone surrogates) that records a command's members into flat
// lists without building a tree (scanDocument).
type jsonParser struct {
	data  []byte
	pos   int
	depth int
	// esc holds the decoded form of strings that held escapes.
	esc []byte
	// env and payload receive the members scanDocument records.
	env, payload []flatMember
}

// fail returns a *SyntaxError at the current position.
func (p *jsonParser) fail(msg string) error {
	return &SyntaxError{Offset: p.pos, Msg: msg}
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

func (p *jsonParser) literal(lit string) error {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return p.fail("invalid literal, want " + lit)
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

// number scans a number literal and returns where its text is.
func (p *jsonParser) number() (span, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos >= len(p.data):
		return span{}, p.fail("incomplete number")
	case p.data[p.pos] == '0':
		p.pos++
	case isDigit(p.data[p.pos]):
		p.digits()
	default:
		return span{}, p.fail("invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return span{}, p.fail("invalid number: no digits after the decimal point")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return span{}, p.fail("invalid number: no digits in the exponent")
		}
	}
	return span{off: start, end: p.pos}, nil
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
		return 0, p.fail("incomplete \\u escape")
	}
	var r rune
	for i := 0; i < 4; i++ {
		v, ok := hexVal(p.data[p.pos+i])
		if !ok {
			return 0, p.fail("invalid \\u escape")
		}
		r = r<<4 | v
	}
	p.pos += 4
	return r, nil
}

// span locates a scanned string's decoded bytes (or a number's literal):
// data[off:end], or esc[off:end] when the string held escapes.
type span struct {
	off, end int
	esc      bool
}

// bytesOf returns the bytes a span locates. They alias the parser's buffers.
func (p *jsonParser) bytesOf(s span) []byte {
	if s.esc {
		return p.esc[s.off:s.end]
	}
	return p.data[s.off:s.end]
}

// scanStr parses a string starting at the opening quote. A string without
// escapes is located in the input itself; one with escapes is decoded onto
// p.esc.
func (p *jsonParser) scanStr() (span, error) {
	p.pos++ // opening quote
	start := p.pos
	data := p.data
	for p.pos < len(data) {
		c := data[p.pos]
		switch {
		case c == '"':
			sp := span{off: start, end: p.pos}
			p.pos++
			return sp, nil
		case c == '\\':
			return p.scanEscaped(start)
		case c < 0x20:
			return span{}, p.fail("unescaped control character in string")
		case c < 0x80:
			p.pos++
		default:
			r, size := utf8.DecodeRune(data[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return span{}, p.fail("invalid UTF-8 in string")
			}
			p.pos += size
		}
	}
	return span{}, p.fail("unterminated string")
}

// scanEscaped continues scanStr at the first backslash of a string whose
// content starts at start, decoding it onto p.esc.
func (p *jsonParser) scanEscaped(start int) (span, error) {
	off := len(p.esc)
	buf := append(p.esc, p.data[start:p.pos]...)
	defer func() { p.esc = buf }()
	for {
		if p.pos >= len(p.data) {
			return span{}, p.fail("unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return span{off: off, end: len(buf), esc: true}, nil
		case c < 0x20:
			return span{}, p.fail("unescaped control character in string")
		case c < 0x80 && c != '\\':
			buf = append(buf, c)
			p.pos++
		case c >= 0x80:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return span{}, p.fail("invalid UTF-8 in string")
			}
			buf = append(buf, p.data[p.pos:p.pos+size]...)
			p.pos += size
		default: // backslash
			p.pos++
			if p.pos >= len(p.data) {
				return span{}, p.fail("unterminated escape")
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
					return span{}, err
				}
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return span{}, p.fail("lone low surrogate in \\u escape")
				case r >= 0xD800 && r <= 0xDBFF:
					if len(p.data)-p.pos < 2 || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
						return span{}, p.fail("lone high surrogate in \\u escape")
					}
					p.pos += 2
					lo, err := p.hex4()
					if err != nil {
						return span{}, err
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return span{}, p.fail("high surrogate not followed by a low surrogate")
					}
					r = utf16.DecodeRune(r, lo)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return span{}, p.fail("invalid escape in string")
			}
		}
	}
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return p.fail(nestingMsg)
	}
	return nil
}

// flatValue is a scanned value without its contents: the scalar parts the
// decoder reads, and for an object scanned in scanPayload mode the range of
// its members in jsonParser.payload.
type flatValue struct {
	kind     jsonKind
	b        bool
	text     span // string contents, number literal or an object's whole text
	from, to int  // payload members, for an object recorded as a payload
}

// flatMember is one recorded object member.
type flatMember struct {
	name span
	val  flatValue
	// str is where the decoder copied a string value in its arena, or -1.
	str int
	// field is the payload member's field index in its type, or -1.
	field int
}

// scanMode says which object members scan records.
type scanMode uint8

const (
	scanSkip     scanMode = iota // validate only
	scanEnvelope                 // record members in p.env; a "payload" member's object in p.payload
	scanPayload                  // record members in p.payload
)

// scanDocument checks that data is exactly one JSON value surrounded by
// optional whitespace. If the value is an object, its members are recorded in p.env,
// and the members of each of its "payload" members that is an object in
// p.payload. Nothing else is kept.
func (p *jsonParser) scanDocument() (flatValue, error) {
	p.skipWS()
	if p.pos >= len(p.data) {
		return flatValue{}, p.fail("no JSON value")
	}
	v, err := p.scan(scanEnvelope)
	if err != nil {
		return flatValue{}, err
	}
	p.skipWS()
	if p.pos != len(p.data) {
		return flatValue{}, p.fail("unexpected data after the JSON value")
	}
	return v, nil
}

func (p *jsonParser) scan(mode scanMode) (flatValue, error) {
	if p.pos >= len(p.data) {
		return flatValue{}, p.fail("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		// An object's text is kept so that an object field can be
		// scanned again (normalizeObject).
		start := p.pos
		v, err := p.scanObject(mode)
		v.text = span{off: start, end: p.pos}
		return v, err
	case c == '[':
		return flatValue{kind: jsonArray}, p.scanArray()
	case c == '"':
		sp, err := p.scanStr()
		return flatValue{kind: jsonString, text: sp}, err
	case c == 't':
		return flatValue{kind: jsonBool, b: true}, p.literal("true")
	case c == 'f':
		return flatValue{kind: jsonBool}, p.literal("false")
	case c == 'n':
		return flatValue{kind: jsonNull}, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		sp, err := p.number()
		return flatValue{kind: jsonNumber, text: sp}, err
	default:
		return flatValue{}, p.fail("unexpected character, want a JSON value")
	}
}

func (p *jsonParser) scanArray() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // [
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return nil
	}
	for {
		p.skipWS()
		if _, err := p.scan(scanSkip); err != nil {
			return err
		}
		p.skipWS()
		if p.pos >= len(p.data) {
			return p.fail("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			return nil
		default:
			return p.fail("want ',' or ']' in array")
		}
	}
}

func (p *jsonParser) scanObject(mode scanMode) (flatValue, error) {
	if err := p.enter(); err != nil {
		return flatValue{}, err
	}
	p.pos++ // {
	v := flatValue{kind: jsonObject, from: len(p.payload)}
	v.to = v.from
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return v, nil
	}
	for {
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return flatValue{}, p.fail("want a member name string")
		}
		name, err := p.scanStr()
		if err != nil {
			return flatValue{}, err
		}
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return flatValue{}, p.fail("want ':' after member name")
		}
		p.pos++
		p.skipWS()
		child := scanSkip
		if mode == scanEnvelope && string(p.bytesOf(name)) == "payload" {
			child = scanPayload
		}
		val, err := p.scan(child)
		if err != nil {
			return flatValue{}, err
		}
		switch mode {
		case scanEnvelope:
			p.env = append(p.env, flatMember{name: name, val: val, str: -1, field: -1})
		case scanPayload:
			p.payload = append(p.payload, flatMember{name: name, val: val, str: -1, field: -1})
		}
		p.skipWS()
		if p.pos >= len(p.data) {
			return flatValue{}, p.fail("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.depth--
			if mode == scanPayload {
				v.to = len(p.payload)
			}
			return v, nil
		default:
			return flatValue{}, p.fail("want ',' or '}' in object")
		}
	}
}
