package operation

import (
	"strconv"
	"strings"
	"time"
)

// safeFieldName returns prefix+name for an error's Field when name is an
// ordinary identifier that does not itself look like a secret, else "" (the
// name was chosen by the sender and may be anything, a card number included).
func safeFieldName(prefix, name string) string {
	if len(name) == 0 || len(name) > 64 {
		return ""
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return ""
		}
	}
	if secretReason(name) != "" {
		return ""
	}
	return prefix + name
}

// normalizePayload validates a payload object against t and returns its
// normalised significant fields.
func normalizePayload(t Type, payload jsonValue) (map[string]any, *DecodeError) {
	fields := make(map[string]any, len(t.Fields))
	seen := make(map[string]bool, len(payload.members))
	for _, m := range payload.members {
		if seen[m.name] {
			return nil, &DecodeError{Code: CodeInvalidField, Field: safeFieldName("payload.", m.name),
				Msg: "duplicate member name in the payload"}
		}
		seen[m.name] = true
		if isTransportField(m.name) {
			continue
		}
		f, ok := t.Field(m.name)
		if !ok {
			return nil, &DecodeError{Code: CodeInvalidField, Field: safeFieldName("payload.", m.name),
				Msg: "not a field of " + t.Name}
		}
		if m.value.kind == jsonNull {
			continue // absent; a required field is reported below
		}
		v, msg := normalizeValue(f, m.value)
		if msg != "" {
			return nil, &DecodeError{Code: CodeInvalidField, Field: "payload." + f.Name, Msg: msg}
		}
		fields[f.Name] = v
	}
	for _, f := range t.Fields {
		if _, ok := fields[f.Name]; !ok && f.Required {
			return nil, &DecodeError{Code: CodeMissingField, Field: "payload." + f.Name, Msg: "required by " + t.Name}
		}
	}
	return fields, nil
}

// normalizeValue returns the normalised value of one field, or a message that
// names the problem without quoting the value.
func normalizeValue(f Field, v jsonValue) (any, string) {
	switch f.Kind {
	case KindString:
		if v.kind != jsonString {
			return nil, "must be a string, got " + v.kindName()
		}
		return normalizeString(f, v.text)
	case KindMoney:
		n, msg := jsonInteger(v)
		if msg != "" {
			return nil, msg + " (money is an integer amount in minor units)"
		}
		switch {
		case n < 0:
			return nil, "must not be negative"
		case n == 0 && !f.AllowZero:
			return nil, "must be greater than zero"
		}
		return n, ""
	case KindInt:
		n, msg := jsonInteger(v)
		if msg != "" {
			return nil, msg
		}
		return n, ""
	case KindCurrency:
		if v.kind != jsonString {
			return nil, "must be a string, got " + v.kindName()
		}
		s := v.text
		if len(s) != 3 || !isASCIILetter(s[0]) || !isASCIILetter(s[1]) || !isASCIILetter(s[2]) {
			return nil, "must be a 3-letter currency code"
		}
		return strings.ToUpper(s), ""
	case KindTime:
		if v.kind != jsonString {
			return nil, "must be an RFC 3339 timestamp string, got " + v.kindName()
		}
		t, ok := parseRFC3339(v.text)
		if !ok {
			return nil, "must be an RFC 3339 timestamp with an offset, e.g. 2026-12-02T10:00:00+03:00"
		}
		return t, ""
	case KindDate:
		if v.kind != jsonString {
			return nil, "must be a YYYY-MM-DD date string, got " + v.kindName()
		}
		d, err := time.Parse(time.DateOnly, v.text)
		if err != nil || len(v.text) != len(time.DateOnly) || d.Format(time.DateOnly) != v.text {
			return nil, "must be a calendar date YYYY-MM-DD"
		}
		return v.text, ""
	case KindBool:
		if v.kind != jsonBool {
			return nil, "must be true or false, got " + v.kindName()
		}
		return v.b, ""
	}
	return nil, "has an unknown kind"
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func normalizeString(f Field, s string) (any, string) {
	if f.Required && s == "" {
		return nil, "must not be empty"
	}
	maxLen := f.MaxLen
	if maxLen == 0 {
		maxLen = DefaultMaxLen
	}
	n := 0
	for _, r := range s { // valid UTF-8: the parser checked it
		n++
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			if !f.Multiline {
				return nil, "must not contain tab or line breaks"
			}
		case r < 0x20 || r == 0x7F || (r >= 0x80 && r <= 0x9F):
			return nil, "must not contain control characters"
		}
	}
	if n > maxLen {
		return nil, "longer than " + strconv.Itoa(maxLen) + " characters"
	}
	return s, ""
}

// jsonInteger reads a JSON number that must be an integer literal within
// ±(2^53-1), the range a fingerprint can hold exactly.
func jsonInteger(v jsonValue) (int64, string) {
	if v.kind != jsonNumber {
		return 0, "must be a JSON integer, got " + v.kindName()
	}
	if strings.ContainsAny(v.text, ".eE") {
		return 0, "must be a JSON integer, without fraction or exponent"
	}
	n, err := strconv.ParseInt(v.text, 10, 64)
	if err != nil || n > maxSafeInt || n < -maxSafeInt {
		return 0, "must be at most 2^53-1 in magnitude"
	}
	return n, ""
}

// parseRFC3339 parses an RFC 3339 timestamp with an explicit offset and
// returns it in UTC. Go's parser also takes a comma before fractional seconds
// and some out-of-grammar forms; those are refused here, as are times whose
// UTC year leaves 0001–9999 (they would not survive a round trip).
func parseRFC3339(s string) (time.Time, bool) {
	// YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
	if len(s) < len("2006-01-02T15:04:05Z") || strings.ContainsRune(s, ',') {
		return time.Time{}, false
	}
	if s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18} {
		if !isDigit(s[i]) {
			return time.Time{}, false
		}
	}
	rest := s[19:]
	if len(rest) > 0 && rest[0] == '.' {
		j := 1
		for j < len(rest) && isDigit(rest[j]) {
			j++
		}
		if j == 1 || j > 10 {
			return time.Time{}, false
		}
		rest = rest[j:]
	}
	switch {
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && isDigit(rest[1]) && isDigit(rest[2]) &&
		rest[3] == ':' && isDigit(rest[4]) && isDigit(rest[5]):
	default:
		return time.Time{}, false
	}
	norm := s
	if s[10] == 't' || s[len(s)-1] == 'z' {
		norm = strings.ToUpper(s)
	}
	t, err := time.Parse(time.RFC3339Nano, norm)
	if err != nil {
		return time.Time{}, false
	}
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}, false
	}
	return t, true
}
