package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// The --json output of the tools (trace) is for other programs: member
// names are snake_case, like every other name idemgate shows (log keys,
// result fields, configuration keys), and an absent value — no lease, a
// time not reached yet, an empty code — is null rather than a zero value
// that reads like data ("0001-01-01T00:00:00Z"). The journal's types carry
// no JSON tags of their own, so their exported fields are mapped here by
// name: a field added to them shows up without a change here.

// jsonField is one member of a jsonObject.
type jsonField struct {
	name  string
	value any
}

// jsonObject is a JSON object whose members keep their order.
type jsonObject []jsonField

// MarshalJSON writes the members in order.
func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(f.name)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// toolJSON turns a value of the journal's types into its --json form:
// structs become jsonObjects with snake_case names (or their json tag),
// zero times, empty strings and empty raw JSON become null, times are
// RFC 3339 in UTC, slices stay arrays (empty, not null).
func toolJSON(v any) any { return toolValue(reflect.ValueOf(v)) }

func toolValue(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	switch {
	case t == timeType:
		tm := v.Interface().(time.Time)
		if tm.IsZero() {
			return nil
		}
		return tm.UTC().Format(time.RFC3339Nano)
	case t == rawType:
		raw := v.Interface().(json.RawMessage)
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			return nil
		}
		return raw
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return toolValue(v.Elem())
	case reflect.String:
		if v.Len() == 0 {
			return nil
		}
		return v.String()
	case reflect.Slice, reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = toolValue(v.Index(i))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[toolKey(it.Key())] = toolValue(it.Value())
		}
		return out
	case reflect.Struct:
		obj := make(jsonObject, 0, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := snakeCase(f.Name)
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
				continue
			} else if tag != "" {
				name = tag
			}
			obj = append(obj, jsonField{name, toolValue(v.Field(i))})
		}
		return obj
	}
	return v.Interface()
}

func toolKey(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return k.String()
	}
	b, _ := json.Marshal(k.Interface())
	return strings.Trim(string(b), `"`)
}

// snakeCase turns a Go field name into snake_case, keeping initialisms
// together: TargetObjectID → target_object_id, LeaseTTL → lease_ttl,
// HTTPStatus → http_status.
func snakeCase(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if i > 0 && (prevLower || (nextLower && unicode.IsUpper(r[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
