package e2e

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/idemgate/idemgate/journal"
)

// decodeTrace reads what `idemgate trace KEY --json` prints: members in
// snake_case (target_object_id for TargetObjectID), null for what is absent.
// Every member must map onto a field of the journal's types, so a renamed
// or new member is noticed here rather than silently left out.
func decodeTrace(out []byte) (journal.Record, []journal.Attempt, error) {
	var doc struct {
		Operation map[string]json.RawMessage   `json:"operation"`
		Attempts  []map[string]json.RawMessage `json:"attempts"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return journal.Record{}, nil, err
	}
	var rec journal.Record
	if err := fromSnakeCase(doc.Operation, &rec); err != nil {
		return rec, nil, fmt.Errorf("operation: %w", err)
	}
	atts := make([]journal.Attempt, len(doc.Attempts))
	for i, a := range doc.Attempts {
		if err := fromSnakeCase(a, &atts[i]); err != nil {
			return rec, nil, fmt.Errorf("attempts[%d]: %w", i, err)
		}
	}
	return rec, atts, nil
}

func fromSnakeCase(obj map[string]json.RawMessage, into any) error {
	v := reflect.ValueOf(into).Elem()
	used := map[string]bool{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name := snakeCase(f.Name)
		raw, ok := obj[name]
		if !ok {
			continue
		}
		used[name] = true
		if string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, v.Field(i).Addr().Interface()); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	for name := range obj {
		if !used[name] {
			return fmt.Errorf("member %q matches no field of %T", name, into)
		}
	}
	return nil
}

// snakeCase is TargetObjectID → target_object_id, LeaseTTL → lease_ttl.
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
