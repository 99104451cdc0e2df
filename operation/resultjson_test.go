package operation_test

import (
	"encoding/json"
	"testing"

	"github.com/idemgate/idemgate/operation"
)

// resultCases are results whose encodings differ in every way
// json.Marshal's can: omitted members, escapes, raw results to compact.
var resultCases = []operation.Result{
	{},
	{OperationKey: "prod:payment.charge:intent-1:v1", EventID: "evt-1", Operation: "payment.charge",
		Status: operation.ResultSucceeded, TargetSystem: "yookassa", TargetObjectID: "2d0e9b4c-000f-5000-8000-1a2b3c4d5e6f",
		Result: json.RawMessage(`{"amount_minor":1250,"business_status":"succeeded","currency":"RUB","paid":true}`), Attempts: 1},
	{OperationKey: "k", EventID: "e", Status: operation.ResultConflict, Attempts: 2, Replayed: true,
		ConflictFields: []string{"amount_minor", "currency"}, CommandSeq: 18446744073709551615},
	{OperationKey: "<a&b>\"\\\b\f\n\r\t\x00\x1f\x7f", EventID: "caf\u00e9 \u2028 \u2029 \U0001F600 \xff\xfe",
		Status: operation.ResultFailedFinal, ErrorCode: "declined", Reason: "it's <b>bad</b> & \"quoted\"", NextAction: "human_review", Attempts: -3},
	{Result: json.RawMessage(" { \"a\" : [ 1 , 2.5e3 , \"<&>\u2028\" , null , true ] , \"b\" : { } } ")},
	{Result: json.RawMessage(`"plain"`), ConflictFields: []string{}},
	{Result: json.RawMessage(`{"x":"\u003c already escaped"}`), ConflictFields: []string{"", "\u2029"}},
	{OperationKey: "k", Status: operation.ResultConflict, ConflictFields: []string{"amount_minor"},
		Existing: &operation.Existing{Status: operation.ResultSucceeded, TargetObjectID: "<pay&1>"}},
	{Status: operation.ResultConflict, Existing: &operation.Existing{Status: operation.ResultFailedFinal, ErrorCode: "declined"}},
	{Status: operation.ResultConflict, Existing: &operation.Existing{}},
}

func TestResultAppendJSONIsJSONMarshal(t *testing.T) {
	t.Parallel()
	for i, r := range resultCases {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("case %d: json.Marshal: %v", i, err)
		}
		got, err := r.AppendJSON(nil)
		if err != nil {
			t.Fatalf("case %d: AppendJSON: %v", i, err)
		}
		if string(got) != string(want) {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
		// Appends: what dst held stays in front.
		if got, _ := r.AppendJSON([]byte("prefix")); string(got) != "prefix"+string(want) {
			t.Errorf("case %d: appended to a prefix: %s", i, got)
		}
	}
}

func TestResultAppendJSONRefusesAnInvalidResult(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{`, `{"a":}`, `nul`, `1 2`, "\"\x01\""} {
		r := operation.Result{OperationKey: "k", Result: json.RawMessage(raw)}
		if _, err := json.Marshal(r); err == nil {
			t.Fatalf("json.Marshal took %q", raw)
		}
		if b, err := r.AppendJSON(nil); err == nil {
			t.Errorf("AppendJSON took %q: %s", raw, b)
		}
	}
}

// FuzzResultAppendJSON holds AppendJSON to json.Marshal on any strings and
// raw result.
func FuzzResultAppendJSON(f *testing.F) {
	for _, r := range resultCases {
		f.Add(r.OperationKey, r.EventID, r.Reason, []byte(r.Result), r.Attempts, r.CommandSeq, r.Replayed)
	}
	f.Fuzz(func(t *testing.T, key, event, reason string, raw []byte, attempts int, seq uint64, replayed bool) {
		r := operation.Result{OperationKey: key, EventID: event, Operation: reason, Status: operation.ResultStatus(key),
			TargetSystem: event, TargetObjectID: reason, Result: raw, ErrorCode: key, Reason: reason,
			Attempts: attempts, Replayed: replayed, CommandSeq: seq, ConflictFields: []string{key, event},
			Existing: &operation.Existing{Status: operation.ResultStatus(event), TargetObjectID: reason, ErrorCode: key}}
		want, werr := json.Marshal(r)
		got, gerr := r.AppendJSON(nil)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("json.Marshal error %v, AppendJSON error %v", werr, gerr)
		}
		if werr == nil && string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkResultJSON encodes a payment's succeeded result.
//
//	go test -run '^$' -bench ResultJSON -benchmem ./operation/
func BenchmarkResultJSON(b *testing.B) {
	r := resultCases[1]
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = r.AppendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}
