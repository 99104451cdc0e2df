package sqlite

import (
	"encoding/json"
	"strconv"
)

// batchJSON builds the JSON array that a batch statement reads with
// json_each: one element per item, either a string (a list of keys) or an
// array of strings, integers and nulls (one item's fields).
type batchJSON struct {
	b     []byte
	fresh bool // the current item has no field yet
}

func newBatchJSON(items, width int) *batchJSON {
	b := make([]byte, 1, 2+items*width)
	b[0] = '['
	return &batchJSON{b: b}
}

func (j *batchJSON) sepItem() {
	if len(j.b) > 1 {
		j.b = append(j.b, ',')
	}
}

// key adds a bare string item.
func (j *batchJSON) key(s string) {
	j.sepItem()
	j.b = appendJSONString(j.b, s)
}

// keys returns the array of the given keys alone.
func (j *batchJSON) keys(keys ...string) string {
	for _, k := range keys {
		j.key(k)
	}
	return j.String()
}

// begin opens an array item; end closes it.
func (j *batchJSON) begin() {
	j.sepItem()
	j.b = append(j.b, '[')
	j.fresh = true
}

func (j *batchJSON) end() { j.b = append(j.b, ']') }

func (j *batchJSON) sepField() {
	if !j.fresh {
		j.b = append(j.b, ',')
	}
	j.fresh = false
}

func (j *batchJSON) str(s string) {
	j.sepField()
	j.b = appendJSONString(j.b, s)
}

// item adds an array item of strings.
func (j *batchJSON) item(ss ...string) {
	j.begin()
	j.strs(ss...)
	j.end()
}

func (j *batchJSON) strs(ss ...string) {
	for _, s := range ss {
		j.str(s)
	}
}

func (j *batchJSON) int(v int64) {
	j.sepField()
	j.b = strconv.AppendInt(j.b, v, 10)
}

func (j *batchJSON) null() {
	j.sepField()
	j.b = append(j.b, "null"...)
}

// String closes the array. SQLite must receive it as TEXT: a BLOB argument to
// json_each is read as JSONB.
func (j *batchJSON) String() string {
	return string(append(j.b, ']'))
}

// appendJSONString appends s as a JSON string. Strings are valid UTF-8 (the
// store checks them first), so encoding/json changes nothing but the escapes.
func appendJSONString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, err := json.Marshal(s)
	if err != nil { // unreachable: a Go string always marshals
		return append(b, `""`...)
	}
	return append(b, q...)
}
