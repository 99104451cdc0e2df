package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/operation"
)

// MaxEventIDLen is the longest event id ingest publishes as is; longer
// derivations are hashed (see EventID), so the operation key built from the
// id stays within operation.MaxKeyLen.
const MaxEventIDLen = 128

// EventID returns the stable event id of a notification from source, made of
// parts (the provider's event id, or the fields that identify the event where
// the provider has none):
//
//	stripe    the event's "id"                  stripe:evt_1NG8Du2eZvKYlo2C
//	standard  the webhook-id header             billing:msg_p5jXN8AQM9LWM0D4loKWxJek
//	yookassa  "event", "object.id"              yookassa:payment.succeeded:22d6d597-000f-5000-9000-145f6df21d6f
//	tbank     "PaymentId", "Status", "Amount"   tbank:123456789:CONFIRMED:19200
//
// (YooKassa's event names carry the status; T-Bank's Amount tells partial
// refunds apart.) The id is "<source>:" plus the parts joined by ':', so two
// sources never share an id. When that id would break the key rules
// (operation.ValidateID: an out-of-alphabet character, something looking
// like a card number or a secret) or exceed MaxEventIDLen, it is
// "<source>:sha256-" plus the first 32 hex digits of the SHA-256 of the parts
// as a compact JSON array of strings (no HTML escaping) instead: still
// stable across redeliveries, and safe to log.
func EventID(source string, parts ...string) string {
	id := source + ":" + strings.Join(parts, ":")
	if len(id) <= MaxEventIDLen && operation.ValidateID("event_id", id) == nil && !slicesHasEmpty(parts) {
		return id
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(parts) // injective over the parts; strings always encode
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
	return source + ":sha256-" + hex.EncodeToString(sum[:16])
}

func slicesHasEmpty(ss []string) bool {
	for _, s := range ss {
		if s == "" {
			return true
		}
	}
	return false
}

// parseBody parses a JSON body with numbers kept as json.Number. The root
// must be an object and nothing may follow it.
func parseBody(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, errors.New("body is not valid JSON: " + jsonErrorText(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("body is not valid JSON: data after the top-level value")
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("body must be a JSON object")
	}
	return obj, nil
}

// jsonErrorText describes a decoding error without quoting the input
// (encoding/json's messages may quote a piece of it).
func jsonErrorText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return "invalid input"
}

// checkPath checks a dot-separated JSON path.
func checkPath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	for seg := range strings.SplitSeq(p, ".") {
		if seg == "" {
			return errors.New("empty segment in path")
		}
	}
	return nil
}

// lookup returns the value at a dot-separated path; a numeric segment indexes
// an array. Absent and null both give ok false.
func lookup(root any, path string) (any, bool) {
	cur := root
	for seg := range strings.SplitSeq(path, ".") {
		switch node := cur.(type) {
		case map[string]any:
			v, ok := node[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			cur = node[i]
		default:
			return nil, false
		}
	}
	return cur, cur != nil
}

// lookupString returns the scalar at path as text (see ConvertString).
func lookupString(root any, path string) (string, bool) {
	v, ok := lookup(root, path)
	if !ok {
		return "", false
	}
	s, err := toString(v)
	return s, err == nil
}

// MappingError is why a route's payload could not be built from a body. It
// names the field, never the value.
type MappingError struct {
	Field  string
	Reason string
}

func (e *MappingError) Error() string { return "payload field " + e.Field + ": " + e.Reason }

// mapPayload builds a route's payload from the body. Every string taken from
// the body passes through operation.MaskText (redact.String), the rule every
// face applies to free text, before it is published: the sender's
// free text (a Stripe description mapped into a title, say) may hold a card
// number or a token, and JetStream keeps what it is given. Card numbers keep
// their first six and last four digits; tokens, JWTs, credentials and long
// random runs become "[REDACTED]". Values that hold nothing of the kind (the
// detector is the one that screens operation keys, so ids pass) are
// published as received; constants from the route are not touched.
func mapPayload(r Route, doc map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(r.Payload))
	for _, f := range r.Payload {
		if f.Path == "" {
			out[f.Field] = f.Value
			continue
		}
		v, ok := lookup(doc, f.Path)
		if !ok {
			if f.Optional {
				continue
			}
			return nil, &MappingError{Field: f.Field, Reason: "path " + f.Path + " not found in the body"}
		}
		cv, err := convert(v, f)
		if err != nil {
			return nil, &MappingError{Field: f.Field, Reason: err.Error()}
		}
		if s, ok := cv.(string); ok {
			cv = operation.MaskText(s)
		}
		out[f.Field] = cv
	}
	return out, nil
}

func convert(v any, f FieldMap) (any, error) {
	switch f.Convert {
	case ConvertNone:
		return v, nil
	case ConvertString:
		return toString(v)
	case ConvertInt:
		return toInt(v)
	case ConvertMinorUnits:
		return toMinorUnits(v, f.Scale)
	}
	return nil, fmt.Errorf("unknown convert %q", f.Convert)
}

func toString(v any) (string, error) {
	if s, ok := scalarText(v); ok {
		return s, nil
	}
	return "", errors.New("not a scalar (string, number or boolean)")
}

// scalarText is the text of a decoded JSON scalar (numbers decoded as
// json.Number): a string as it is, a number as written, a boolean as
// true or false.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

func toInt(v any) (json.Number, error) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = v.String()
	default:
		return "", errors.New("not an integer")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strings.HasPrefix(s, "+") {
		return "", errors.New("not an integer")
	}
	return json.Number(strconv.FormatInt(n, 10)), nil
}

// toMinorUnits converts a decimal amount in major units to an integer in
// minor units with scale decimal places: "100.50" (scale 2) → 10050. A
// fraction finer than scale is refused unless its extra digits are zeros;
// exponents and signs other than a leading '-' are refused.
func toMinorUnits(v any, scale int) (json.Number, error) {
	var s string
	switch v := v.(type) {
	case string:
		s = strings.TrimSpace(v)
	case json.Number:
		s = v.String()
	default:
		return "", errors.New("not a decimal amount")
	}
	n, err := parseMinor(s, scale)
	if err != nil {
		return "", err
	}
	return json.Number(strconv.FormatInt(n, 10)), nil
}

func parseMinor(s string, scale int) (int64, error) {
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") || !allDigits(whole) || !allDigits(frac) {
		return 0, errors.New("not a decimal amount")
	}
	if len(frac) > scale {
		if strings.Trim(frac[scale:], "0") != "" {
			return 0, fmt.Errorf("more than %d decimal places", scale)
		}
		frac = frac[:scale]
	}
	frac += strings.Repeat("0", scale-len(frac))
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return 0, nil
	}
	if len(digits) > 18 {
		return 0, errors.New("amount too large")
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, errors.New("amount too large")
	}
	if neg {
		n = -n
	}
	return n, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
