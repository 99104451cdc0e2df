package operation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// FieldDigestLen is the length, in hex digits, of one field's digest: 16
// bits. That is enough to tell which field of a conflicting request changed
// (a changed field goes unnamed once in 65,536 times; the conflict itself is
// decided by the full fingerprint), and too short to recover a value by
// trying candidates: every digest matches thousands of amounts or ids.
const FieldDigestLen = 4

// FieldDigests returns a short digest of each significant field, keyed by
// field name and encoded as a JSON object ({"amount_minor":"9f3c",…}): what
// the journal keeps beside the fingerprint so that a conflict can name the
// fields that differ, never their values. Each digest is the first
// FieldDigestLen hex digits of SHA-256 over the operation key, the field's
// name and its canonical value, so equal values under other keys do not
// share digests. Fields the request left out have none.
func (o Operation) FieldDigests() string {
	if len(o.Fields) == 0 {
		return ""
	}
	names := make([]string, 0, len(o.Fields))
	for name := range o.Fields {
		names = append(names, name)
	}
	slices.Sort(names)
	key := o.Key.String()
	in := make([]byte, 0, 128)
	out := make([]byte, 0, 2+len(names)*(FieldDigestLen+24))
	out = append(out, '{')
	for _, name := range names {
		var err error
		in = append(append(append(append(in[:0], key...), 0), name...), 0)
		if in, err = appendCanonical(in, o.Fields[name]); err != nil {
			continue // not a normalised value: no digest, never named
		}
		sum := sha256.Sum256(in)
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendJCSString(out, name)
		out = append(out, ':', '"')
		out = hex.AppendEncode(out, sum[:FieldDigestLen/2])
		out = append(out, '"')
	}
	return string(append(out, '}'))
}

// ConflictFields names, sorted, the fields whose digests differ between the
// digests stored with a key's first request and a later request's (a field
// present in only one of them differs). Either side empty or unreadable
// names none: the conflict stands, only its fields are unknown.
func ConflictFields(stored, request string) []string {
	if stored == "" || request == "" {
		return nil
	}
	var a, b map[string]string
	if json.Unmarshal([]byte(stored), &a) != nil || json.Unmarshal([]byte(request), &b) != nil {
		return nil
	}
	var out []string
	for name, d := range a {
		if b[name] != d {
			out = append(out, name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
