package operation

// The reference canonicaliser: a JSON tree parser on the production
// scanner's primitives, and RFC 8785 output for any JSON text or for a set of
// normalised fields. Only tests use it. It is checked against gowebpki/jcs
// (the oracle), and Decode's fingerprints are checked against it, so the fast
// path that writes the canonical form straight from the scanned members
// (Decoder.Decode) has two independent witnesses.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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

// parseJSON parses exactly one JSON value surrounded by optional whitespace,
// with the scanner's grammar and errors; an object with two members of the
// same name is an error.
func parseJSON(data []byte) (jsonValue, error) {
	p := &jsonParser{data: data}
	p.skipWS()
	if p.pos >= len(p.data) {
		return jsonValue{}, p.fail("no JSON value")
	}
	v, err := p.value()
	if err != nil {
		return jsonValue{}, err
	}
	p.skipWS()
	if p.pos != len(p.data) {
		return jsonValue{}, p.fail("unexpected data after the JSON value")
	}
	return v, nil
}

func (p *jsonParser) value() (jsonValue, error) {
	if p.pos >= len(p.data) {
		return jsonValue{}, p.fail("unexpected end of input")
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
		sp, err := p.number()
		if err != nil {
			return jsonValue{}, err
		}
		return jsonValue{kind: jsonNumber, text: string(p.bytesOf(sp))}, nil
	default:
		return jsonValue{}, p.fail("unexpected character, want a JSON value")
	}
}

// str parses a string starting at the opening quote and returns its decoded
// UTF-8 value.
func (p *jsonParser) str() (string, error) {
	sp, err := p.scanStr()
	if err != nil {
		return "", err
	}
	s := string(p.bytesOf(sp))
	if sp.esc {
		p.esc = p.esc[:sp.off]
	}
	return s, nil
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
			return jsonValue{}, p.fail("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return jsonValue{}, p.fail("want ',' or ']' in array")
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
	seen := make(map[string]struct{})
	for {
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return jsonValue{}, p.fail("want a member name string")
		}
		namePos := p.pos
		name, err := p.str()
		if err != nil {
			return jsonValue{}, err
		}
		if _, dup := seen[name]; dup {
			return jsonValue{}, &SyntaxError{Offset: namePos, Msg: "duplicate member name"}
		}
		seen[name] = struct{}{}
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return jsonValue{}, p.fail("want ':' after member name")
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
			return jsonValue{}, p.fail("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return jsonValue{}, p.fail("want ',' or '}' in object")
		}
	}
}

// canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of a
// JSON text: no insignificant whitespace, object members sorted by their
// names' UTF-16 code units, strings in their minimal escaped form, and numbers
// as ECMAScript 6 would print the IEEE-754 double they denote.
//
// Input is parsed strictly: invalid UTF-8, lone surrogates, duplicate member
// names, trailing data and numbers beyond the double range are errors
// (*SyntaxError, matching ErrNotJSON). A number is canonicalized through
// float64, so integers beyond 2^53 lose precision, exactly as RFC 8785
// requires; fingerprinted money is therefore limited to 2^53-1 minor units.
func canonicalize(data []byte) ([]byte, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(data))
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v jsonValue) error {
	switch v.kind {
	case jsonNull:
		buf.WriteString("null")
	case jsonBool:
		if v.b {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case jsonNumber:
		f, err := strconv.ParseFloat(v.text, 64)
		if err != nil {
			return &SyntaxError{Msg: "number out of the IEEE-754 double range"}
		}
		s, err := formatES6(f)
		if err != nil {
			return &SyntaxError{Msg: err.Error()}
		}
		buf.WriteString(s)
	case jsonString:
		writeJCSString(buf, v.text)
	case jsonArray:
		buf.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case jsonObject:
		type sortable struct {
			key []uint16
			m   *jsonMember
		}
		ms := make([]sortable, len(v.members))
		for i := range v.members {
			ms[i] = sortable{key: utf16.Encode([]rune(v.members[i].name)), m: &v.members[i]}
		}
		slices.SortFunc(ms, func(a, b sortable) int { return slices.Compare(a.key, b.key) })
		buf.WriteByte('{')
		for i, s := range ms {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJCSString(buf, s.m.name)
			buf.WriteByte(':')
			if err := writeCanonical(buf, s.m.value); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	}
	return nil
}

// writeJCSString writes s (valid UTF-8) as an RFC 8785 string (see
// appendJCSString).
func writeJCSString(buf *bytes.Buffer, s string) {
	buf.Write(appendJCSString(buf.AvailableBuffer(), s))
}

// formatES6 formats f as ECMAScript's Number.prototype.toString does
// (ECMA-262 7.1.12.1), which RFC 8785 adopts: the shortest digits that
// round-trip, plain notation for 1e-6 <= |f| < 1e21, otherwise exponent
// notation with an explicit sign and no leading zeros ("1e+21", "1e-7").
// -0 prints as "0"; NaN and infinities are errors.
func formatES6(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", errors.New("NaN and infinity have no JSON form")
	}
	if f == 0 {
		return "0", nil
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	b := strconv.AppendFloat(make([]byte, 0, 32), f, format, -1, 64)
	if format == 'e' {
		// Go writes a two-digit exponent ("1e-07", "1e+21"); ES6 writes the
		// minimal one.
		if i := bytes.IndexByte(b, 'e'); i >= 0 && i+3 < len(b) && b[i+2] == '0' {
			b = append(b[:i+2], b[i+3:]...)
		}
	}
	return string(b), nil
}

// canonicalForm returns the RFC 8785 text a fingerprint hashes:
// {"operation": opType} merged with the normalised fields, members sorted by
// their UTF-16 code units here (Decode uses an order precomputed per type),
// each value written by appendCanonical. A field named "operation" is an
// error, as is a value appendCanonical refuses.
func canonicalForm(opType string, fields map[string]any) ([]byte, error) {
	if opType == "" {
		return nil, errors.New("canonical form: empty operation type")
	}
	if !utf8.ValidString(opType) {
		return nil, errors.New("canonical form: operation type is not valid UTF-8")
	}
	type member struct {
		key  []uint16
		name string
		val  string
	}
	ms := make([]member, 0, len(fields)+1)
	var vb bytes.Buffer
	writeJCSString(&vb, opType)
	ms = append(ms, member{key: utf16.Encode([]rune("operation")), name: "operation", val: vb.String()})
	for name, v := range fields {
		if name == "operation" {
			return nil, errors.New(`canonical form: a field may not be named "operation"`)
		}
		if !utf8.ValidString(name) {
			return nil, errors.New("canonical form: field name is not valid UTF-8")
		}
		text, err := appendCanonical(nil, v)
		if err != nil {
			return nil, fmt.Errorf("canonical form: field %s: %w", strconv.Quote(name), err)
		}
		ms = append(ms, member{key: utf16.Encode([]rune(name)), name: name, val: string(text)})
	}
	slices.SortFunc(ms, func(a, b member) int { return slices.Compare(a.key, b.key) })
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJCSString(&buf, m.name)
		buf.WriteByte(':')
		buf.WriteString(m.val)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// fingerprint is the reference for Operation.Fingerprint: the lower-case hex
// SHA-256 of canonicalForm(opType, fields).
func fingerprint(opType string, fields map[string]any) (string, error) {
	b, err := canonicalForm(opType, fields)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
