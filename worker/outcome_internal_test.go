package worker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/redact"
)

// outcomes are what adapters return: a YooKassa payment and refund, a
// T-Bank payment, a 1C document, a Bitrix24 entity with duplicates, an
// outcome without details, and text that must be redacted.
var outcomes = []adapters.Outcome{
	{BusinessStatus: "succeeded", Details: map[string]any{"amount_minor": int64(125000), "currency": "RUB", "paid": true}},
	{BusinessStatus: "succeeded", Details: map[string]any{"amount_minor": int64(5000), "currency": "RUB", "payment_id": "2d0e9b4c-000f-5000-8000-1a2b3c4d5e6f"}},
	{BusinessStatus: "canceled", Details: map[string]any{"amount_minor": int64(100), "currency": "RUB", "paid": false,
		"cancellation_party": "payment_network", "cancellation_reason": "insufficient_funds"}},
	{BusinessStatus: "CONFIRMED", Details: map[string]any{"amount_minor": 990, "order_id": "order-1", "card": "430000******0777"}},
	{BusinessStatus: "posted", Details: map[string]any{"number": "0000-000123", "posted": true, "target_replayed": false, "key_stored": false}},
	{BusinessStatus: "created", Details: map[string]any{"entity": "deal", "target_replayed": true, "duplicates": 2, "duplicate_object_ids": []string{"17", "18"}}},
	{BusinessStatus: "succeeded"},
	{BusinessStatus: "note 4111 1111 1111 1111", Details: map[string]any{"comment": `{"token":"abc","pan":"4111111111111111"}`,
		"business_status": "ignored", "api_key": "sk_live_51H8abcdefghijklmnopqrstuv", "n": int64(4111111111111111)}},
}

// TestOutcomeJSONRedactsAsItWrites: the default redaction, done while the
// document is written, gives the bytes redact.JSON makes of the encoded
// document.
func TestOutcomeJSONRedactsAsItWrites(t *testing.T) {
	t.Parallel()
	viaJSON := Deps{Redact: func(r json.RawMessage) json.RawMessage { return redact.JSON(r) }}
	for _, o := range outcomes {
		want := outcomeJSON(viaJSON, o)
		got := outcomeJSON(Deps{}, o)
		require.Equal(t, string(want), string(got), "%+v", o)
		require.True(t, json.Valid(got), "%s", got)
	}
	got := string(outcomeJSON(Deps{}, outcomes[7]))
	require.NotContains(t, got, "4111111111111111")
	require.NotContains(t, got, "sk_live")
	require.NotContains(t, got, `"abc"`)
	require.Contains(t, got, `"business_status":"note 4111 11** **** 1111"`)
}

// BenchmarkOutcomeJSON: the result of a YooKassa payment, encoded and then
// redacted by parsing it back (marshal+redact.JSON, what a custom
// Deps.Redact still gets) beside redacted as it is written (append, the
// default).
//
//	go test -run '^$' -bench OutcomeJSON -count=6 ./worker/ | benchstat -col /how -
func BenchmarkOutcomeJSON(b *testing.B) {
	o := outcomes[1]
	for _, c := range []struct {
		name string
		d    Deps
	}{
		{"how=marshal+redact.JSON", Deps{Redact: func(r json.RawMessage) json.RawMessage { return redact.JSON(r) }}},
		{"how=append", Deps{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(outcomeJSON(c.d, o)) == 0 {
					b.Fatal("empty")
				}
			}
		})
	}
}
