package redact

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// AppendMember appends one object member, `"name":value`, redacted by the
// rules of JSON, to dst, without encoding the value and parsing it back:
// the bytes are those JSON writes for the member in the encoding/json
// encoding of an object holding it. A secret name (IsSecretKey) takes
// Placeholder as its value; the name itself passes through String.
//
// The kind of a Go value says which parts may carry text: strings (and the
// strings inside []string, []any and map[string]any) go through String, or
// through JSON when they hold a JSON object or array; integers are checked
// only for card numbers; booleans and nil are copied. Maps write their
// members in key order, as encoding/json does. json.RawMessage is redacted
// by JSON; a value of any other type is encoded with encoding/json and
// redacted by JSON. The error is encoding/json's for a value it cannot
// encode (a NaN, a channel).
func AppendMember(dst []byte, name string, v any) ([]byte, error) {
	k := memberName(name)
	dst = append(dst, k.encoded...)
	dst = append(dst, ':')
	if k.secret {
		return appendString(dst, Placeholder), nil
	}
	return appendValue(dst, v)
}

// AppendValue appends the redacted JSON encoding of v to dst: the bytes
// JSON returns for the encoding/json encoding of v (see AppendMember).
func AppendValue(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v)
}

// appendArray appends xs as a JSON array, each element by appendElem; a
// nil slice is null.
func appendArray[T any](dst []byte, xs []T, appendElem func([]byte, T) ([]byte, error)) ([]byte, error) {
	if xs == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, x := range xs {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendElem(dst, x); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

func appendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendText(dst, x)
	case int:
		return appendDigits(dst, strconv.AppendInt(dst, int64(x), 10)), nil
	case int64:
		return appendDigits(dst, strconv.AppendInt(dst, x, 10)), nil
	case int32:
		return appendDigits(dst, strconv.AppendInt(dst, int64(x), 10)), nil
	case uint64:
		return appendDigits(dst, strconv.AppendUint(dst, x, 10)), nil
	case uint:
		return appendDigits(dst, strconv.AppendUint(dst, uint64(x), 10)), nil
	case json.RawMessage:
		if x == nil {
			return append(dst, "null"...), nil
		}
		if !json.Valid(x) {
			return dst, errors.New("redact: invalid json.RawMessage")
		}
		return append(dst, JSON(x)...), nil
	case []string:
		return appendArray(dst, x, appendText)
	case []any:
		return appendArray(dst, x, appendValue)
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return appendObject(dst, x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, JSON(b)...), nil
}

func appendObject(dst []byte, m map[string]any) ([]byte, error) {
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = AppendMember(dst, k, m[k]); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// sortStrings is an insertion sort: objects in results have a handful of
// members.
func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// appendDigits masks a card number in the number just appended to dst
// after its first start bytes: JSON writes such a number as the masked
// string.
func appendDigits(start, dst []byte) []byte {
	n := dst[len(start):]
	if len(n) < minPAN {
		return dst
	}
	if m := MaskPANs(string(n)); m != string(n) {
		return appendString(dst[:len(start)], m)
	}
	return dst
}

// appendText appends a string value as JSON writes it: redacted by String,
// or as JSON when it holds an object or array. A string that is not valid
// UTF-8 takes encoding/json's detour, which replaces each bad byte.
func appendText(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		b, err := json.Marshal(s)
		if err != nil {
			return dst, err
		}
		return append(dst, JSON(b)...), nil
	}
	w := jsonWriter{}
	return appendString(dst, w.redactString(s)), nil
}

// appendString appends s as a JSON string the way JSON writes strings
// (encoding/json without HTML escaping).
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			var w jsonWriter
			w.writeString(s)
			return append(dst, w.buf.Bytes()...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// nameInfo is what a member name becomes: its redacted, quoted form and
// whether its value is secret. Results use a small fixed set of names, so
// each is worked out once.
type nameInfo struct {
	encoded string
	secret  bool
}

var (
	names  sync.Map // string → nameInfo
	namesN atomic.Int32
)

// maxNames bounds the member names kept.
const maxNames = 4096

func memberName(name string) nameInfo {
	if v, ok := names.Load(name); ok {
		return v.(nameInfo)
	}
	text := name
	if !utf8.ValidString(text) {
		// encoding/json writes each bad byte as U+FFFD.
		b, _ := json.Marshal(text)
		_ = json.Unmarshal(b, &text)
	}
	k := nameInfo{encoded: string(appendString(nil, String(text))), secret: IsSecretKey(text)}
	if namesN.Add(1) <= maxNames {
		names.Store(name, k)
	}
	return k
}
