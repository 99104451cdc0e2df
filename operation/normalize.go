package operation

import (
	"bytes"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/redact"
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

// fieldValue is one normalised payload field as the decoder holds it before
// boxing it into Operation.Fields.
type fieldValue struct {
	seen    bool // the member appeared (null included): a second one is a duplicate
	present bool // the member appeared and was not null
	s       string
	n       int64
	b       bool
	t       time.Time
	o       map[string]any // KindObject
}

// value returns the field's Operation.Fields value.
func (v *fieldValue) value(k FieldKind) any {
	switch k {
	case KindMoney, KindInt:
		return v.n
	case KindTime:
		return v.t
	case KindBool:
		return v.b
	case KindObject:
		return v.o
	default: // KindString, KindCurrency, KindDate, KindEnum
		return v.s
	}
}

// normalizePayload validates the members of a payload object against t and
// fills vals (len(t.Fields), zeroed) with the normalised significant fields.
// String values of fields are read from the arena as (see flatMember.str).
func normalizePayload(t *registeredType, p *jsonParser, members []flatMember, as string, vals []fieldValue) *DecodeError {
	var transportSeen uint8
	for k := range members {
		m := &members[k]
		name := p.bytesOf(m.name)
		fi := m.field
		ti := -1
		if fi < 0 {
			ti = transportIndex(name)
		}
		// A repeated unknown name is reported as unknown at its first
		// appearance, so only fields and transport fields need tracking.
		switch {
		case fi >= 0 && vals[fi].seen, ti >= 0 && transportSeen&(1<<ti) != 0:
			return &DecodeError{Code: CodeInvalidField, Field: safeFieldName("payload.", string(name)),
				Msg: "duplicate member name in the payload"}
		case fi >= 0:
			vals[fi].seen = true
		case ti >= 0:
			transportSeen |= 1 << ti
			continue
		default:
			return &DecodeError{Code: CodeInvalidField, Field: safeFieldName("payload.", string(name)),
				Msg: "not a field of " + t.Name}
		}
		if m.val.kind == jsonNull {
			continue // absent; a required field is reported below
		}
		f := &t.Fields[fi]
		s := ""
		if m.str >= 0 {
			s = as[m.str : m.str+m.val.text.end-m.val.text.off]
		}
		var num []byte
		if m.val.kind == jsonNumber {
			num = p.bytesOf(m.val.text)
		}
		if f.Kind == KindObject {
			if m.val.kind != jsonObject {
				return &DecodeError{Code: CodeInvalidField, Field: "payload." + f.Name, Msg: "must be an object, got " + m.val.kindName()}
			}
			o, path, msg := normalizeObject(f, p.data[m.val.text.off:m.val.text.end])
			if msg != "" {
				return &DecodeError{Code: CodeInvalidField, Field: "payload." + f.Name + path, Msg: msg}
			}
			vals[fi].o, vals[fi].present = o, true
			continue
		}
		if msg := normalizeValue(f, m.val, s, num, &vals[fi]); msg != "" {
			return &DecodeError{Code: CodeInvalidField, Field: "payload." + f.Name, Msg: msg}
		}
		vals[fi].present = true
	}
	for i := range t.Fields {
		if f := &t.Fields[i]; f.Required && !vals[i].present {
			return &DecodeError{Code: CodeMissingField, Field: "payload." + f.Name, Msg: "required by " + t.Name}
		}
	}
	return nil
}

// normalizeValue normalises one field into out, or returns a message that
// names the problem without quoting the value. s is a string value (for a
// currency field already ASCII upper-cased), num a number's literal.
func normalizeValue(f *Field, v flatValue, s string, num []byte, out *fieldValue) string {
	switch f.Kind {
	case KindString:
		if v.kind != jsonString {
			return "must be a string, got " + v.kindName()
		}
		if f.FreeText {
			s = MaskText(s)
		}
		if msg := checkString(f, s); msg != "" {
			return msg
		}
		if !f.FreeText {
			// The target's own payment id (a refund's payment_id) is its
			// reference, often a long run of digits (T-Bank's PaymentId),
			// and passes the Luhn check one time in ten: only secrets in
			// other formats are refused there.
			idCard := f.Name == "payment_id" && redact.Detect(s) == redact.KindCard
			if reason := secretReason(s); reason != "" && !idCard {
				return reason + "; a field that is not free text must hold no card number or secret"
			}
		}
		out.s = s
	case KindMoney:
		n, msg := jsonInteger(v, num)
		if msg != "" {
			return msg + " (money is an integer amount in minor units)"
		}
		switch {
		case n < 0:
			return "must not be negative"
		case n == 0 && !f.AllowZero:
			return "must be greater than zero"
		}
		out.n = n
	case KindInt:
		n, msg := jsonInteger(v, num)
		if msg != "" {
			return msg
		}
		out.n = n
	case KindCurrency:
		if v.kind != jsonString {
			return "must be a string, got " + v.kindName()
		}
		if len(s) != 3 || !isASCIILetter(s[0]) || !isASCIILetter(s[1]) || !isASCIILetter(s[2]) {
			return "must be a 3-letter currency code"
		}
		out.s = s
	case KindTime:
		if v.kind != jsonString {
			return "must be an RFC 3339 timestamp string, got " + v.kindName()
		}
		t, ok := parseRFC3339(s)
		if !ok {
			return "must be an RFC 3339 timestamp with an offset, e.g. 2026-12-02T10:00:00+03:00"
		}
		out.t = t
	case KindDate:
		if v.kind != jsonString {
			return "must be a YYYY-MM-DD date string, got " + v.kindName()
		}
		var buf [len(time.DateOnly)]byte
		d, err := time.Parse(time.DateOnly, s)
		if err != nil || len(s) != len(time.DateOnly) || string(d.AppendFormat(buf[:0], time.DateOnly)) != s {
			return "must be a calendar date YYYY-MM-DD"
		}
		out.s = s
	case KindBool:
		if v.kind != jsonBool {
			return "must be true or false, got " + v.kindName()
		}
		out.b = v.b
	case KindEnum:
		if v.kind != jsonString {
			return "must be a string, got " + v.kindName()
		}
		ok := false
		for _, e := range f.Enum {
			if e == s {
				ok = true
				break
			}
		}
		if !ok {
			return "must be one of the declared values: " + strings.Join(f.Enum, ", ")
		}
		out.s = s
	default:
		return "has an unknown kind"
	}
	return ""
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// upperASCII upper-cases ASCII letters in place, as strings.ToUpper does for
// a currency code (anything else fails the currency check either way).
func upperASCII(b []byte) {
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
}

// checkString applies a string field's rules to s (valid UTF-8: the parser
// checked it).
func checkString(f *Field, s string) string {
	if f.Required && s == "" {
		return "must not be empty"
	}
	maxLen := f.MaxLen
	if maxLen == 0 {
		maxLen = DefaultMaxLen
	}
	n := 0
	for i := 0; i < len(s); {
		r := rune(s[i])
		if r < utf8.RuneSelf {
			i++
		} else {
			var size int
			r, size = utf8.DecodeRuneInString(s[i:])
			i += size
		}
		n++
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			if !f.Multiline {
				return "must not contain tab or line breaks"
			}
		case r < 0x20 || r == 0x7F || (r >= 0x80 && r <= 0x9F):
			return "must not contain control characters"
		}
	}
	if n > maxLen {
		return "longer than " + strconv.Itoa(maxLen) + " characters"
	}
	return ""
}

// jsonInteger reads a JSON number that must be an integer literal within
// ±(2^53-1), the range a fingerprint can hold exactly. num is its literal,
// which the parser checked against the JSON number grammar.
func jsonInteger(v flatValue, num []byte) (int64, string) {
	if v.kind != jsonNumber {
		return 0, "must be a JSON integer, got " + v.kindName()
	}
	if bytes.ContainsAny(num, ".eE") {
		return 0, "must be a JSON integer, without fraction or exponent"
	}
	const tooBig = "must be at most 2^53-1 in magnitude"
	digits := num
	neg := len(digits) > 0 && digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 16 { // 2^53-1 has 16 digits
		return 0, tooBig
	}
	var n int64
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	if n > maxSafeInt {
		return 0, tooBig
	}
	if neg {
		n = -n
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

// normalizeObject normalises the members of an object field from its JSON
// text raw (already checked by the scanner) against f.Fields. On failure it
// returns the member path under the field (".city") and a message that does
// not quote the value.
func normalizeObject(f *Field, raw []byte) (map[string]any, string, string) {
	p := jsonParser{data: raw}
	v, err := p.scan(scanPayload)
	if err != nil || v.kind != jsonObject {
		return nil, "", "must be a JSON object"
	}
	vals := make([]fieldValue, len(f.Fields))
	for _, m := range p.payload[v.from:v.to] {
		name := string(p.bytesOf(m.name))
		fi := -1
		for i := range f.Fields {
			if f.Fields[i].Name == name {
				fi = i
				break
			}
		}
		if fi < 0 {
			return nil, safeFieldName(".", name), "not a member of " + f.Name
		}
		sub := &f.Fields[fi]
		if vals[fi].seen {
			return nil, "." + sub.Name, "duplicate member name"
		}
		vals[fi].seen = true
		if m.val.kind == jsonNull {
			continue
		}
		if sub.Kind == KindObject {
			if m.val.kind != jsonObject {
				return nil, "." + sub.Name, "must be an object, got " + m.val.kindName()
			}
			o, path, msg := normalizeObject(sub, raw[m.val.text.off:m.val.text.end])
			if msg != "" {
				return nil, "." + sub.Name + path, msg
			}
			vals[fi].o = o
			vals[fi].present = true
			continue
		}
		s := ""
		var num []byte
		switch m.val.kind {
		case jsonString:
			b := p.bytesOf(m.val.text)
			if sub.Kind == KindCurrency {
				b = append([]byte(nil), b...)
				upperASCII(b)
			}
			s = string(b)
		case jsonNumber:
			num = p.bytesOf(m.val.text)
		}
		if msg := normalizeValue(sub, m.val, s, num, &vals[fi]); msg != "" {
			return nil, "." + sub.Name, msg
		}
		vals[fi].present = true
	}
	out := make(map[string]any, len(f.Fields))
	for i := range f.Fields {
		sub := &f.Fields[i]
		if !vals[i].present {
			if sub.Required {
				return nil, "." + sub.Name, "required by " + f.Name
			}
			continue
		}
		out[sub.Name] = vals[i].value(sub.Kind)
	}
	return out, "", ""
}
