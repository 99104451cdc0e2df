package operation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// maxSafeInt is 2^53-1, the largest integer every IEEE-754 double (and so
// every RFC 8785 implementation) represents exactly.
const maxSafeInt = 1<<53 - 1

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of a
// JSON text: no insignificant whitespace, object members sorted by their
// names' UTF-16 code units, strings in their minimal escaped form, and numbers
// as ECMAScript 6 would print the IEEE-754 double they denote.
//
// Input is parsed strictly: invalid UTF-8, lone surrogates, duplicate member
// names, trailing data and numbers beyond the double range are errors
// (*SyntaxError, matching ErrNotJSON). Note that a number is canonicalized
// through float64, so integers beyond 2^53 lose precision, exactly as RFC 8785
// requires; fingerprinted money is therefore limited to 2^53-1 minor units.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := parseJSON(data, true)
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

// jcsEscape marks the bytes RFC 8785 escapes in a string: '"', '\\' and the
// control characters.
var jcsEscape = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendJCSString appends s (valid UTF-8) as an RFC 8785 string: only '"',
// '\\' and control characters are escaped, the latter with the short forms
// where JSON has them and lower-case \u00xx otherwise.
func appendJCSString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !jcsEscape[c] {
			continue
		}
		b = append(b, s[start:i]...)
		start = i + 1
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
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

// CanonicalForm returns the RFC 8785 text that Fingerprint hashes:
// {"operation": opType} merged with the normalised fields. Field values may be
// string, bool, int64 (or another Go integer type) within ±(2^53-1), or
// time.Time, written in UTC as RFC 3339 with trailing fractional zeros trimmed.
// Anything else is an error rather than a guess, as is a field named
// "operation" or a string that is not valid UTF-8.
func CanonicalForm(opType string, fields map[string]any) ([]byte, error) {
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
		text, err := canonicalScalar(v)
		if err != nil {
			return nil, fmt.Errorf("canonical form: field %s: %w", strconv.Quote(name), err)
		}
		ms = append(ms, member{key: utf16.Encode([]rune(name)), name: name, val: text})
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

func canonicalInt(n int64) (string, error) {
	if n > maxSafeInt || n < -maxSafeInt {
		return "", errors.New("integer beyond ±(2^53-1) cannot be canonicalized exactly")
	}
	return strconv.FormatInt(n, 10), nil
}

func canonicalScalar(v any) (string, error) {
	var buf bytes.Buffer
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return "", errors.New("string is not valid UTF-8")
		}
		writeJCSString(&buf, x)
		return buf.String(), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	case int64:
		return canonicalInt(x)
	case int:
		return canonicalInt(int64(x))
	case int32:
		return canonicalInt(int64(x))
	case uint32:
		return canonicalInt(int64(x))
	case uint64:
		if x > maxSafeInt {
			return "", errors.New("integer beyond ±(2^53-1) cannot be canonicalized exactly")
		}
		return canonicalInt(int64(x))
	case time.Time:
		writeJCSString(&buf, canonicalTime(x))
		return buf.String(), nil
	default:
		return "", fmt.Errorf("unsupported value type %T", v)
	}
}

// canonicalTime is the one textual form of a time in fingerprints and
// re-encoded commands: RFC 3339 in UTC with trailing fractional zeros trimmed.
func canonicalTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}

// Fingerprint returns the request hash of an operation: the lower-case hex
// SHA-256 of CanonicalForm(opType, fields). Two commands for the same
// operation key must have equal fingerprints; a different fingerprint under
// the same key is a conflict.
func Fingerprint(opType string, fields map[string]any) (string, error) {
	b, err := CanonicalForm(opType, fields)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
