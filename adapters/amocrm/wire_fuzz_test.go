package amocrm

import (
	"testing"

	"github.com/idemgate/idemgate/adapters"
)

func FuzzParseAnswers(f *testing.F) {
	for _, s := range []string{
		`{"_embedded":{"leads":[{"id":17657,"request_id":"0"}]}}`,
		`{"_embedded":{"leads":[{"id":1,"name":"x","price":10,"custom_fields_values":[{"field_id":5,"values":[{"value":"k"}]}],"_embedded":{"tags":[{"name":"k"}]}}]}}`,
		`{"_embedded":{"tasks":[{"id":2,"text":"a\n[op:k]"}]}}`,
		`{"title":"Bad Request","status":400,"validation-errors":[]}`,
		`{"_embedded":null}`, `{"_embedded":{"leads":[{"id":-1}]}}`, `null`, `{`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(err error) {
			if err != nil && adapters.AsError(err).Class != adapters.ReconcileBeforeRetry {
				t.Fatalf("class %v", err)
			}
		}
		ls, err := parseLeads(b)
		check(err)
		for _, l := range ls {
			_ = l.holdsKey("k", 5)
			_ = l.holdsKey("k", 0)
		}
		_, err = parseTasks(b)
		check(err)
		if id, err := parseCreated(b, "leads", "0"); err == nil && id <= 0 {
			t.Fatal("non-positive id accepted")
		} else {
			check(err)
		}
	})
}
