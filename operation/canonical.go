package operation

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxSafeInt is 2^53-1, the largest integer every IEEE-754 double (and so
// every RFC 8785 implementation) represents exactly.
const maxSafeInt = 1<<53 - 1

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

// errUnsafeInt refuses an integer a fingerprint cannot hold exactly.
var errUnsafeInt = errors.New("integer beyond ±(2^53-1) cannot be canonicalized exactly")

// appendCanonical appends the RFC 8785 text of one normalised field value,
// as the fingerprint (Decoder.Decode) and the field digests
// (Operation.FieldDigests) both write it: a string (valid UTF-8), a bool, a
// Go integer within ±(2^53-1), or a time.Time (canonicalTime). Anything else
// is an error rather than a guess.
func appendCanonical(b []byte, v any) ([]byte, error) {
	var n int64
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return b, errors.New("string is not valid UTF-8")
		}
		return appendJCSString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case map[string]any:
		// An object field: its members are [a-z][a-z0-9_]* names, whose
		// byte order is RFC 8785's UTF-16 order.
		names := make([]string, 0, len(x))
		for name := range x {
			if !validFieldName(name) {
				return b, errors.New("object member name is not a field name")
			}
			names = append(names, name)
		}
		slices.Sort(names)
		b = append(b, '{')
		for i, name := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJCSString(b, name)
			b = append(b, ':')
			var err error
			if b, err = appendCanonical(b, x[name]); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case time.Time:
		// RFC 3339 text has nothing to escape.
		b = append(b, '"')
		b = x.UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"'), nil
	case int64:
		n = x
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case uint32:
		n = int64(x)
	case uint64:
		if x > maxSafeInt {
			return b, errUnsafeInt
		}
		n = int64(x)
	default:
		return b, fmt.Errorf("unsupported value type %T", v)
	}
	if n > maxSafeInt || n < -maxSafeInt {
		return b, errUnsafeInt
	}
	return strconv.AppendInt(b, n, 10), nil
}

// canonicalTime is the one textual form of a time in fingerprints and
// re-encoded commands: RFC 3339 in UTC with trailing fractional zeros trimmed.
func canonicalTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}
