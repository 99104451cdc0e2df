package operation

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends r encoded as JSON to dst: the same bytes as
// json.Marshal(r) (field order, omitempty, HTML-safe string escapes, the
// Result member compacted and checked), without reflection. Every command's
// result is encoded on the hot path; the tests hold this to json.Marshal.
func (r *Result) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"operation_key":`...)
	dst = appendJSONString(dst, r.OperationKey)
	dst = append(dst, `,"event_id":`...)
	dst = appendJSONString(dst, r.EventID)
	dst = appendOptionalString(dst, `,"operation":`, r.Operation)
	dst = append(dst, `,"status":`...)
	dst = appendJSONString(dst, string(r.Status))
	dst = appendOptionalString(dst, `,"target_system":`, r.TargetSystem)
	dst = appendOptionalString(dst, `,"target_object_id":`, r.TargetObjectID)
	if len(r.Result) > 0 {
		dst = append(dst, `,"result":`...)
		var err error
		if dst, err = appendCompactJSON(dst, r.Result); err != nil {
			return nil, err
		}
	}
	dst = appendOptionalString(dst, `,"error_code":`, r.ErrorCode)
	dst = appendOptionalString(dst, `,"reason":`, r.Reason)
	dst = appendOptionalString(dst, `,"next_action":`, r.NextAction)
	dst = append(dst, `,"attempts":`...)
	dst = strconv.AppendInt(dst, int64(r.Attempts), 10)
	dst = append(dst, `,"replayed":`...)
	dst = strconv.AppendBool(dst, r.Replayed)
	if r.CommandSeq != 0 {
		dst = append(dst, `,"command_seq":`...)
		dst = strconv.AppendUint(dst, r.CommandSeq, 10)
	}
	if len(r.ConflictFields) > 0 {
		dst = append(dst, `,"conflict_fields":[`...)
		for i, f := range r.ConflictFields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, f)
		}
		dst = append(dst, ']')
	}
	if e := r.Existing; e != nil {
		dst = append(dst, `,"existing":{"status":`...)
		dst = appendJSONString(dst, string(e.Status))
		dst = appendOptionalString(dst, `,"target_object_id":`, e.TargetObjectID)
		dst = appendOptionalString(dst, `,"error_code":`, e.ErrorCode)
		dst = append(dst, '}')
	}
	if a := r.Approval; a != nil {
		// Rare (a command waiting for a person): the standard encoder.
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		dst = append(append(dst, `,"approval":`...), b...)
	}
	return append(dst, '}'), nil
}

// appendOptionalString appends name (the comma, the quoted field name and
// the colon) and s quoted, unless s is empty: an omitempty string field.
func appendOptionalString(dst []byte, name, s string) []byte {
	if s == "" {
		return dst
	}
	return appendJSONString(append(dst, name...), s)
}

// appendCompactJSON appends raw as json.Marshal writes a json.RawMessage:
// checked, compacted, and HTML-safe (<, >, &, U+2028 and U+2029 escaped).
func appendCompactJSON(dst, raw []byte) ([]byte, error) {
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return nil, err
	}
	if !needsHTMLEscape(c.Bytes()) {
		return append(dst, c.Bytes()...), nil
	}
	out := bytes.NewBuffer(dst)
	json.HTMLEscape(out, c.Bytes())
	return out.Bytes(), nil
}

// needsHTMLEscape reports whether b holds a byte json.HTMLEscape rewrites:
// <, >, & or the first byte of U+2028/U+2029 (0xE2).
func needsHTMLEscape(b []byte) bool {
	for _, c := range b {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 {
			return true
		}
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json quotes a string with HTML
// escaping on (json.Marshal's default): the same escapes, invalid UTF-8 as
// U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// DetailTargetReplayed is the member of a normalised result saying that the
// target answered with an object it already held for the key (its own
// idempotency replay, e.g. after a lost answer was sent again). It is not
// the envelope's replayed, which says idemgate answered from its journal.
const DetailTargetReplayed = "target_replayed"

// legacyReplayed is what DetailTargetReplayed was called in results stored
// before it had a name of its own.
const legacyReplayed = `"replayed"`

// CurrentResult returns a stored normalised result in today's form: a
// result stored under the old name carries the target's own replay as
// "replayed", which an answer would show beside its own replayed, meaning
// something else; it is renamed DetailTargetReplayed. Any other result is
// returned as it is.
func CurrentResult(b json.RawMessage) json.RawMessage {
	if !bytes.Contains(b, []byte(legacyReplayed)) {
		return b
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	v, ok := m["replayed"]
	if !ok {
		return b
	}
	delete(m, "replayed")
	if _, taken := m[DetailTargetReplayed]; !taken {
		m[DetailTargetReplayed] = v
	}
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}
