package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// InvalidJSON is what JSON returns for input that is not one valid JSON
// value: a JSON string, so that it can still be embedded in a result or a log
// line, and never any of the input.
const InvalidJSON = `"[REDACTED: invalid JSON]"`

// maxNestedJSON bounds how deep JSON documents held inside string values are
// redacted in turn.
const maxNestedJSON = 3

// JSON returns a redacted copy of one JSON value: the values of members whose
// names are secret (IsSecretKey) become "[REDACTED]", however they are nested;
// every other string, member name and number is passed through String, so
// card numbers are masked and known token formats removed (a number holding a
// card number becomes the masked string); a string that itself holds a JSON
// object or array is redacted the same way. Member order is kept; output is
// compact, without HTML escaping. Input that is not exactly one valid JSON
// value yields InvalidJSON. JSON(JSON(x)) == JSON(x).
func JSON(raw []byte) []byte {
	out, err := redactJSON(raw, 0)
	if err != nil {
		return []byte(InvalidJSON)
	}
	return out
}

func redactJSON(raw []byte, depth int) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	w := &jsonWriter{dec: dec, depth: depth}
	if err := w.value(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return w.buf.Bytes(), nil
}

type jsonWriter struct {
	dec   *json.Decoder
	buf   bytes.Buffer
	depth int
}

// value copies the next value, redacting it.
func (w *jsonWriter) value() error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	return w.valueFrom(tok)
}

func (w *jsonWriter) valueFrom(tok json.Token) error {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return w.object()
		case '[':
			return w.array()
		}
		return errors.New("unexpected delimiter")
	case string:
		w.writeString(w.redactString(t))
	case json.Number:
		s := string(t)
		if m := MaskPANs(s); m != s {
			w.writeString(m)
		} else {
			w.buf.WriteString(s)
		}
	case bool:
		if t {
			w.buf.WriteString("true")
		} else {
			w.buf.WriteString("false")
		}
	case nil:
		w.buf.WriteString("null")
	default:
		return errors.New("unexpected token")
	}
	return nil
}

func (w *jsonWriter) object() error {
	w.buf.WriteByte('{')
	first := true
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		name, ok := tok.(string)
		if !ok {
			return errors.New("member name is not a string")
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		w.writeString(String(name))
		w.buf.WriteByte(':')
		if IsSecretKey(name) {
			if err := w.skip(); err != nil {
				return err
			}
			w.writeString(Placeholder)
			continue
		}
		if err := w.value(); err != nil {
			return err
		}
	}
	return w.end('}')
}

func (w *jsonWriter) array() error {
	w.buf.WriteByte('[')
	first := true
	for w.dec.More() {
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		if err := w.value(); err != nil {
			return err
		}
	}
	return w.end(']')
}

// end consumes the delimiter that closes an object or an array, and writes
// it.
func (w *jsonWriter) end(delim byte) error {
	if _, err := w.dec.Token(); err != nil {
		return err
	}
	w.buf.WriteByte(delim)
	return nil
}

// skip consumes the next value without writing it.
func (w *jsonWriter) skip() error {
	level := 0
	for {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				level++
			default:
				level--
			}
		}
		if level == 0 {
			return nil
		}
	}
}

// redactString redacts a string value; one holding a JSON object or array is
// redacted as JSON and kept compact.
func (w *jsonWriter) redactString(s string) string {
	if w.depth < maxNestedJSON {
		if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') {
			if out, err := redactJSON([]byte(t), w.depth+1); err == nil {
				return string(out)
			}
		}
	}
	return String(s)
}

func (w *jsonWriter) writeString(s string) {
	enc := json.NewEncoder(&w.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)               // a string always encodes
	w.buf.Truncate(w.buf.Len() - 1) // Encode's newline
}

// Value returns a redacted copy of a decoded JSON value (map[string]any,
// []any, string, json.Number, float64, bool, nil), by the rules of JSON. Any
// other value is marshalled with encoding/json and returned as the redacted
// json.RawMessage (or the InvalidJSON placeholder if it cannot be marshalled).
func Value(v any) any {
	return value(v, 0)
}

func value(v any, depth int) any {
	switch x := v.(type) {
	case nil, bool:
		return x
	case string:
		w := jsonWriter{depth: depth}
		return w.redactString(x)
	case json.Number:
		if m := MaskPANs(string(x)); m != string(x) {
			return m
		}
		return x
	case float64:
		b, err := json.Marshal(x)
		if err != nil {
			return x
		}
		if m := MaskPANs(string(b)); m != string(b) {
			return m
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if IsSecretKey(k) {
				out[String(k)] = Placeholder
				continue
			}
			out[String(k)] = value(e, depth)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = value(e, depth)
		}
		return out
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return json.RawMessage(InvalidJSON)
		}
		return json.RawMessage(JSON(b))
	}
}
