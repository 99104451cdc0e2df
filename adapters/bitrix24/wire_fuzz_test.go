package bitrix24

import (
	"testing"

	"github.com/idemgate/idemgate/adapters"
)

func FuzzParseAnswers(f *testing.F) {
	for _, s := range []string{
		`{"result":394,"time":{"start":1}}`, `{"result":"394"}`, `{"result":[{"ID":"1","ORIGIN_ID":"k"}],"total":1}`,
		`{"error":"QUERY_LIMIT_EXCEEDED","error_description":"Too many requests"}`, `{"result":[null]}`,
		`{"result":-1}`, `{"result":{"item":{}}}`, `null`, `{`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if id, err := parseAddResult(b); err != nil {
			if adapters.AsError(err).Class != adapters.ReconcileBeforeRetry {
				t.Fatalf("class %v", err)
			}
		} else if id == "" {
			t.Fatal("empty id accepted")
		}
		items, err := parseList(b)
		if err == nil {
			for _, it := range items {
				if it.id == "" {
					t.Fatal("item without id")
				}
				_ = it.str("ORIGIN_ID")
			}
		}
		_ = safeCode(parseError(b).Error)
	})
}
