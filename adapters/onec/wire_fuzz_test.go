package onec

import (
	"encoding/json"
	"testing"

	"github.com/idemgate/idemgate/adapters"
)

func FuzzParseAnswers(f *testing.F) {
	for _, s := range []string{
		`{"key":"k","ref":"6f1c0000-0000-5000-8000-000000000001","number":"0000-000001","posted":true,"replayed":false}`,
		`{"odata.metadata":"x","value":[{"Ref_Key":"a","Number":"1","Posted":false,"ВнешнийКлюч":"k","СуммаДокумента":1250.00}]}`,
		`{"odata.error":{"code":"-1","message":{"lang":"ru","value":"x"}}}`,
		`{"error":"lock_timeout","retry_after":2}`,
		`{"value":[{"Ref_Key":7}]}`, `{"value":null}`, `null`, `[]`, `{`, "\xff",
		`{"Ref_Key":"a","СуммаДокумента":"1e400","ВнешнийКлюч":["x"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			e := adapters.AsError(err)
			if e.Code != adapters.CodeUnexpectedResponse || e.Class != adapters.ReconcileBeforeRetry {
				t.Fatalf("unexpected classification %v", err)
			}
		}
		if a, err := parseInvoiceAnswer(b, adapters.ReconcileBeforeRetry); err == nil && !plainID(a.Ref) {
			t.Fatal("accepted an unusable ref")
		} else {
			check(err)
		}
		l, err := parseODataList(b, DefaultKeyAttribute, adapters.ReconcileBeforeRetry)
		check(err)
		for _, e := range l {
			if !plainID(e.Ref) {
				t.Fatal("accepted an unusable Ref_Key")
			}
			_, _ = minorOf(e.Amount)
		}
		_, err = parseODataEntity(b, DefaultKeyAttribute, adapters.ReconcileBeforeRetry)
		check(err)
		_ = parseServiceError(b)
		_ = odataErrorCode(b)
	})
}

func TestMinorRoundTrip(t *testing.T) {
	for _, m := range []int64{1, 5, 99, 100, 125000, 123456789} {
		got, ok := minorOf(json.Number(adapters.FormatMinor(m)))
		if !ok || got != m {
			t.Fatalf("%d -> %s -> %d", m, adapters.FormatMinor(m), got)
		}
	}
	if _, ok := minorOf("1.234"); ok {
		t.Fatal("three decimals accepted")
	}
}
