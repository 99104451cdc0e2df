package operation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"
)

// vectorCommand is the command envelope example of docs/agents.md (its
// NATS section), whose fingerprint is the project's payment.charge test
// vector.
const vectorCommand = `{ "event_id": "evt-90173", "operation": "payment.charge", "intent_id": "approval-6f3c2a",
  "key_version": "v1", "approval_id": "appr-77",
  "payload": {"account_id": "merchant-account-17", "order_id": "order-48291",
              "amount_minor": 125000, "currency": "rub"} }`

const vectorFingerprint = "28a4262860864e5110d391a4556da2ad2f539ae2f87e52871f80cb7381d86aa6"

func TestDecodeDesignVector(t *testing.T) {
	t.Parallel()
	d := &Decoder{Env: "prod"}
	op, err := d.Decode([]byte(vectorCommand))
	require.NoError(t, err)
	require.Equal(t, Key{Env: "prod", Operation: "payment.charge", IntentID: "approval-6f3c2a", Version: "v1"}, op.Key)
	require.Equal(t, "prod:payment.charge:approval-6f3c2a:v1", op.Key.String())
	require.Equal(t, "evt-90173", op.EventID)
	require.Equal(t, "payment.charge", op.Type)
	require.Equal(t, "payments", op.TargetSystem)
	require.Equal(t, "appr-77", op.ApprovalID)
	require.Equal(t, map[string]any{
		"account_id": "merchant-account-17", "order_id": "order-48291",
		"amount_minor": int64(125000), "currency": "RUB",
	}, op.Fields)
	require.Equal(t, vectorFingerprint, op.Fingerprint)
	require.Equal(t, int64(125000), op.Int("amount_minor"))
	require.Equal(t, "RUB", op.String("currency"))
	doc, err := os.ReadFile("../docs/agents.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), vectorCommand, "docs/agents.md shows this very envelope")
}

// TestDecodeFingerprintStability: what must not change the fingerprint
// (transport fields, member order, whitespace, currency case, approval,
// time zone of an instant) does not, and what must (any significant value)
// does.
func TestDecodeFingerprintStability(t *testing.T) {
	t.Parallel()
	d := &Decoder{Env: "prod"}
	same := []string{
		`{"event_id":"evt-90173","operation":"payment.charge","intent_id":"approval-6f3c2a","approval_id":"appr-78",
		  "payload":{"currency":"RUB","amount_minor":125000,"order_id":"order-48291","account_id":"merchant-account-17",
		             "attempt":3,"sent_at":"2026-12-02T10:00:00Z","trace_id":"abc","traceparent":"00-x","tracestate":"k=v"}}`,
		`{"attempt":2,"trace_id":"t","event_id":"evt-other","operation":"payment.charge","intent_id":"approval-6f3c2a","key_version":"v1","approval_id":"appr-77",
		  "payload":{"account_id":"merchant-account-17","order_id":"order-48291","amount_minor":125000,"currency":"Rub"}}`,
	}
	for _, body := range same {
		op, err := d.Decode([]byte(body))
		require.NoError(t, err)
		require.Equal(t, vectorFingerprint, op.Fingerprint)
		require.Equal(t, "prod:payment.charge:approval-6f3c2a:v1", op.Key.String())
	}
	differ := []string{
		`{"event_id":"e","operation":"payment.charge","approval_id":"a","payload":{"account_id":"merchant-account-17","order_id":"order-48291","amount_minor":125001,"currency":"RUB"}}`,
		`{"event_id":"e","operation":"payment.charge","approval_id":"a","payload":{"account_id":"merchant-account-17","order_id":"order-48291","amount_minor":125000,"currency":"USD"}}`,
		`{"event_id":"e","operation":"payment.charge","approval_id":"a","payload":{"account_id":"merchant-account-18","order_id":"order-48291","amount_minor":125000,"currency":"RUB"}}`,
		`{"event_id":"e","operation":"payment.refund","approval_id":"a","payload":{"payment_id":"merchant-account-17","order_id":"order-48291","amount_minor":125000,"currency":"RUB"}}`,
	}
	for _, body := range differ {
		op, err := d.Decode([]byte(body))
		require.NoError(t, err)
		require.NotEqual(t, vectorFingerprint, op.Fingerprint)
	}

	// One instant written in two zones is one value.
	task := func(deadline string) string {
		return `{"event_id":"evt-1","operation":"crm.task.create","payload":{"title":"Call back","responsible_id":"u-7","deadline":"` + deadline + `"}}`
	}
	a, err := d.Decode([]byte(task("2026-12-02T13:00:00+03:00")))
	require.NoError(t, err)
	b, err := d.Decode([]byte(task("2026-12-02T10:00:00.000Z")))
	require.NoError(t, err)
	require.Equal(t, a.Fingerprint, b.Fingerprint)
	require.Equal(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), a.Time("deadline"))
	require.Equal(t, time.UTC, a.Time("deadline").Location())
	c, err := d.Decode([]byte(task("2026-12-02T10:00:01Z")))
	require.NoError(t, err)
	require.NotEqual(t, a.Fingerprint, c.Fingerprint)
}

func TestDecodeBuiltins(t *testing.T) {
	t.Parallel()
	d := &Decoder{Env: "test"}
	tests := []struct {
		name   string
		body   string
		key    string
		target string
		fields map[string]any
	}{
		{
			name: "invoice.create, all fields",
			body: `{"event_id":"evt-1","operation":"invoice.create","intent_id":"order-demo-1","payload":{"order_id":"order-demo-1","customer_id":"c-1","amount_minor":990,"currency":"eur","due_date":"2026-12-31","description":"Line one\nline two"}}`,
			key:  "test:invoice.create:order-demo-1:v1", target: "1c",
			fields: map[string]any{"order_id": "order-demo-1", "customer_id": "c-1", "amount_minor": int64(990), "currency": "EUR", "due_date": "2026-12-31", "description": "Line one\nline two"},
		},
		{
			name: "crm.task.create, optional null",
			body: `{"event_id":"evt-2","operation":"crm.task.create","key_version":"v2","payload":{"title":"  Call back  ","responsible_id":"u-7","customer_id":null,"deadline":"2026-12-02T10:00:00.5+01:00"}}`,
			key:  "test:crm.task.create:evt-2:v2", target: "crm",
			fields: map[string]any{"title": "  Call back  ", "responsible_id": "u-7", "deadline": time.Date(2026, 12, 2, 9, 0, 0, 500_000_000, time.UTC)},
		},
		{
			name: "crm.deal.create, zero amount allowed",
			body: `{"event_id":"evt-3","operation":"crm.deal.create","payload":{"title":"Deal","customer_id":"c-9","amount_minor":0,"currency":"RUB","stage":"NEW"}}`,
			key:  "test:crm.deal.create:evt-3:v1", target: "crm",
			fields: map[string]any{"title": "Deal", "customer_id": "c-9", "amount_minor": int64(0), "currency": "RUB", "stage": "NEW"},
		},
		{
			name: "payment.refund with operation_key",
			body: `{"event_id":"evt-4","operation":"payment.refund","operation_key":"test:payment.refund:refund:ord-1:v3","approval_id":"appr-1","payload":{"payment_id":"pay_2c1f","amount_minor":9007199254740991,"currency":"usd"}}`,
			key:  "test:payment.refund:refund:ord-1:v3", target: "payments",
			fields: map[string]any{"payment_id": "pay_2c1f", "amount_minor": int64(9007199254740991), "currency": "USD"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op, err := d.Decode([]byte(tt.body))
			require.NoError(t, err)
			require.Equal(t, tt.key, op.Key.String())
			require.Equal(t, tt.target, op.TargetSystem)
			require.Equal(t, tt.fields, op.Fields)
			fp, err := fingerprint(op.Type, op.Fields)
			require.NoError(t, err)
			require.Equal(t, fp, op.Fingerprint)
			requireRoundTrip(t, d, op)
		})
	}
}

// requireRoundTrip re-encodes op as a command and decodes it again.
func requireRoundTrip(t testing.TB, d *Decoder, op Operation) {
	t.Helper()
	cmd, err := op.Command()
	require.NoError(t, err)
	body, err := json.Marshal(cmd)
	require.NoError(t, err)
	again, err := d.Decode(body)
	require.NoError(t, err, "re-encoded command %s", body)
	require.Equal(t, op.Key, again.Key)
	require.Equal(t, op.Fingerprint, again.Fingerprint)
	require.Equal(t, op.ApprovalID, again.ApprovalID)
	require.Equal(t, op.EventID, again.EventID)
	require.Equal(t, len(op.Fields), len(again.Fields))
	for k, v := range op.Fields {
		if tv, ok := v.(time.Time); ok {
			require.True(t, tv.Equal(again.Time(k)))
			continue
		}
		require.Equal(t, v, again.Fields[k], k)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	const okPayload = `{"account_id":"a-1","order_id":"o-1","amount_minor":100,"currency":"RUB"}`
	charge := func(payload string) string {
		return `{"event_id":"evt-1","operation":"payment.charge","approval_id":"appr-1","payload":` + payload + `}`
	}
	const key = "prod:payment.charge:evt-1:v1"
	tests := []struct {
		name    string
		body    string
		maxSize int
		code    DecodeCode
		field   string
		key     string // expected DecodeError.Key
		eventID string
	}{
		// not_json
		{name: "empty body", body: ``, code: CodeNotJSON},
		{name: "garbage", body: `hello`, code: CodeNotJSON},
		{name: "truncated", body: `{"event_id":"evt-1"`, code: CodeNotJSON},
		{name: "trailing data", body: charge(okPayload) + `{}`, code: CodeNotJSON},
		{name: "array", body: `[1,2]`, code: CodeNotJSON},
		{name: "string", body: `"evt-1"`, code: CodeNotJSON},
		{name: "invalid UTF-8", body: "{\"event_id\":\"evt-\xff\"}", code: CodeNotJSON},
		{name: "lone surrogate", body: `{"event_id":"\ud800"}`, code: CodeNotJSON},
		{name: "single quotes", body: `{'event_id':'x'}`, code: CodeNotJSON},
		{name: "trailing comma", body: `{"event_id":"x",}`, code: CodeNotJSON},
		{name: "leading zero", body: charge(`{"amount_minor":0100}`), code: CodeNotJSON},
		// too_large
		{name: "over MaxSize", body: charge(okPayload), maxSize: 50, code: CodeTooLarge},
		{name: "over default size", body: charge(`{"description":"` + strings.Repeat("a", DefaultMaxSize) + `"}`), code: CodeTooLarge},
		// unknown_operation
		{name: "unknown operation", body: `{"event_id":"evt-1","operation":"payment.steal","payload":{}}`, code: CodeUnknownOperation, field: "operation", eventID: "evt-1"},
		{name: "operation not a name", body: `{"event_id":"evt-1","operation":"Payment Charge!","payload":{}}`, code: CodeUnknownOperation, field: "operation", eventID: "evt-1"},
		// missing_field
		{name: "no event_id", body: `{"operation":"payment.charge","approval_id":"a","payload":` + okPayload + `}`, code: CodeMissingField, field: "event_id"},
		{name: "empty event_id", body: `{"event_id":"","operation":"payment.charge","approval_id":"a","payload":` + okPayload + `}`, code: CodeMissingField, field: "event_id"},
		{name: "null event_id", body: `{"event_id":null,"operation":"payment.charge","approval_id":"a","payload":` + okPayload + `}`, code: CodeMissingField, field: "event_id"},
		{name: "no operation", body: `{"event_id":"evt-1","payload":{}}`, code: CodeMissingField, field: "operation", eventID: "evt-1"},
		{name: "no payload", body: `{"event_id":"evt-1","operation":"payment.charge","approval_id":"a"}`, code: CodeMissingField, field: "payload", key: key, eventID: "evt-1"},
		{name: "null payload", body: charge(`null`), code: CodeMissingField, field: "payload", key: key, eventID: "evt-1"},
		{name: "missing amount", body: charge(`{"account_id":"a-1","order_id":"o-1","currency":"RUB"}`), code: CodeMissingField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "null required field", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":null,"currency":"RUB"}`), code: CodeMissingField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		// invalid_field: envelope
		{name: "unknown envelope member", body: `{"event_id":"evt-1","operation":"payment.charge","approval_id":"a","payload":` + okPayload + `,"amount":1}`, code: CodeInvalidField, field: "amount", key: key, eventID: "evt-1"},
		{name: "unknown envelope member with a card number as name", body: `{"event_id":"evt-1","operation":"payment.charge","approval_id":"a","payload":` + okPayload + `,"4111111111111111":1}`, code: CodeInvalidField, field: "", key: key, eventID: "evt-1"},
		{name: "duplicate envelope member", body: `{"event_id":"evt-1","operation":"payment.charge","approval_id":"a","payload":` + okPayload + `,"approval_id":"b"}`, code: CodeInvalidField, field: "approval_id", key: key, eventID: "evt-1"},
		{name: "duplicate event_id", body: `{"event_id":"evt-1","event_id":"evt-2","operation":"payment.charge","approval_id":"a","payload":` + okPayload + `}`, code: CodeInvalidField, field: "event_id"},
		{name: "duplicate payload", body: `{"event_id":"evt-1","operation":"payment.charge","approval_id":"a","payload":` + okPayload + `,"payload":` + okPayload + `}`, code: CodeInvalidField, field: "payload", key: key, eventID: "evt-1"},
		{name: "event_id not a string", body: `{"event_id":17,"operation":"payment.charge","approval_id":"a","payload":` + okPayload + `}`, code: CodeInvalidField, field: "event_id"},
		{name: "event_id with a space", body: `{"event_id":"evt 1","operation":"payment.charge","approval_id":"a","payload":` + okPayload + `}`, code: CodeInvalidField, field: "event_id"},
		{name: "event_id holding a card", body: `{"event_id":"4111111111111111","operation":"payment.charge","intent_id":"i-1","approval_id":"a","payload":` + okPayload + `}`, code: CodeInvalidField, field: "event_id", key: "prod:payment.charge:i-1:v1"},
		{name: "approval_id holding a token", body: `{"event_id":"evt-1","operation":"payment.charge","approval_id":"sk_live_abc","payload":` + okPayload + `}`, code: CodeInvalidField, field: "approval_id", key: key, eventID: "evt-1"},
		{name: "payload an array", body: charge(`[]`), code: CodeInvalidField, field: "payload", key: key, eventID: "evt-1"},
		{name: "payload a string", body: charge(`"{}"`), code: CodeInvalidField, field: "payload", key: key, eventID: "evt-1"},
		// invalid_field: payload
		{name: "unknown payload field", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":100,"currency":"RUB","recipient":"x"}`), code: CodeInvalidField, field: "payload.recipient", key: key, eventID: "evt-1"},
		{name: "duplicate amount", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":100,"amount_minor":100000,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "amount float", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":100.5,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "amount float with zero fraction", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":100.0,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "amount exponent", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":1e5,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "amount string", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":"100","currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "amount negative", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":-100,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "amount zero", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":0,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "amount 2^53", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":9007199254740992,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "amount beyond int64", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":99999999999999999999999,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.amount_minor", key: key, eventID: "evt-1"},
		{name: "currency too long", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":1,"currency":"RUBL"}`), code: CodeInvalidField, field: "payload.currency", key: key, eventID: "evt-1"},
		{name: "currency digits", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":1,"currency":"643"}`), code: CodeInvalidField, field: "payload.currency", key: key, eventID: "evt-1"},
		{name: "currency non-ASCII", body: charge(`{"account_id":"a-1","order_id":"o-1","amount_minor":1,"currency":"РУБ"}`), code: CodeInvalidField, field: "payload.currency", key: key, eventID: "evt-1"},
		{name: "required string empty", body: charge(`{"account_id":"","order_id":"o-1","amount_minor":1,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.account_id", key: key, eventID: "evt-1"},
		{name: "string a number", body: charge(`{"account_id":17,"order_id":"o-1","amount_minor":1,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.account_id", key: key, eventID: "evt-1"},
		{name: "string with control char", body: charge(`{"account_id":"a\u0007","order_id":"o-1","amount_minor":1,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.account_id", key: key, eventID: "evt-1"},
		{name: "string with newline", body: charge(`{"account_id":"a\nb","order_id":"o-1","amount_minor":1,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.account_id", key: key, eventID: "evt-1"},
		{name: "string with C1 control", body: charge(`{"account_id":"a\u0085","order_id":"o-1","amount_minor":1,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.account_id", key: key, eventID: "evt-1"},
		{name: "string too long", body: charge(`{"account_id":"` + strings.Repeat("я", 129) + `","order_id":"o-1","amount_minor":1,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.account_id", key: key, eventID: "evt-1"},
		{name: "nested object value", body: charge(`{"account_id":{"id":"a"},"order_id":"o-1","amount_minor":1,"currency":"RUB"}`), code: CodeInvalidField, field: "payload.account_id", key: key, eventID: "evt-1"},
		{name: "time without offset", body: `{"event_id":"evt-1","operation":"crm.task.create","payload":{"title":"t","responsible_id":"u","deadline":"2026-12-02T10:00:00"}}`, code: CodeInvalidField, field: "payload.deadline", key: "prod:crm.task.create:evt-1:v1", eventID: "evt-1"},
		{name: "time with comma", body: `{"event_id":"evt-1","operation":"crm.task.create","payload":{"title":"t","responsible_id":"u","deadline":"2026-12-02T10:00:00,5Z"}}`, code: CodeInvalidField, field: "payload.deadline", key: "prod:crm.task.create:evt-1:v1", eventID: "evt-1"},
		{name: "time a date", body: `{"event_id":"evt-1","operation":"crm.task.create","payload":{"title":"t","responsible_id":"u","deadline":"2026-12-02"}}`, code: CodeInvalidField, field: "payload.deadline", key: "prod:crm.task.create:evt-1:v1", eventID: "evt-1"},
		{name: "time leaving year 1-9999 in UTC", body: `{"event_id":"evt-1","operation":"crm.task.create","payload":{"title":"t","responsible_id":"u","deadline":"9999-12-31T23:00:00-02:00"}}`, code: CodeInvalidField, field: "payload.deadline", key: "prod:crm.task.create:evt-1:v1", eventID: "evt-1"},
		{name: "date with time", body: `{"event_id":"evt-1","operation":"invoice.create","payload":{"order_id":"o","customer_id":"c","amount_minor":1,"currency":"RUB","due_date":"2026-12-31T00:00:00Z"}}`, code: CodeInvalidField, field: "payload.due_date", key: "prod:invoice.create:evt-1:v1", eventID: "evt-1"},
		{name: "date impossible", body: `{"event_id":"evt-1","operation":"invoice.create","payload":{"order_id":"o","customer_id":"c","amount_minor":1,"currency":"RUB","due_date":"2026-02-30"}}`, code: CodeInvalidField, field: "payload.due_date", key: "prod:invoice.create:evt-1:v1", eventID: "evt-1"},
		// bad_key
		{name: "intent with a card number", body: `{"event_id":"evt-1","operation":"payment.charge","intent_id":"4111-1111-1111-1111","approval_id":"a","payload":` + okPayload + `}`, code: CodeBadKey, field: "intent_id", eventID: "evt-1"},
		{name: "intent with a secret token", body: `{"event_id":"evt-1","operation":"payment.charge","intent_id":"sk_live_abc","approval_id":"a","payload":` + okPayload + `}`, code: CodeBadKey, field: "intent_id", eventID: "evt-1"},
		{name: "intent with a space", body: `{"event_id":"evt-1","operation":"payment.charge","intent_id":"a b","approval_id":"a","payload":` + okPayload + `}`, code: CodeBadKey, field: "intent_id", eventID: "evt-1"},
		{name: "intent too long", body: `{"event_id":"evt-1","operation":"payment.charge","intent_id":"` + strings.Repeat("a-", 130) + `","approval_id":"a","payload":` + okPayload + `}`, code: CodeBadKey, field: "intent_id", eventID: "evt-1"},
		{name: "bad key_version", body: `{"event_id":"evt-1","operation":"payment.charge","key_version":"1","approval_id":"a","payload":` + okPayload + `}`, code: CodeBadKey, field: "key_version", eventID: "evt-1"},
		{name: "operation_key unparsable", body: `{"event_id":"evt-1","operation":"payment.charge","operation_key":"prod:payment.charge","approval_id":"a","payload":` + okPayload + `}`, code: CodeBadKey, field: "operation_key", key: key, eventID: "evt-1"},
		{name: "operation_key with a card number", body: `{"event_id":"evt-1","operation":"payment.charge","operation_key":"prod:payment.charge:4111111111111111:v1","approval_id":"a","payload":` + okPayload + `}`, code: CodeBadKey, field: "operation_key", key: key, eventID: "evt-1"},
		// key_mismatch
		{name: "operation_key for another env", body: `{"event_id":"evt-1","operation":"payment.charge","operation_key":"test:payment.charge:evt-1:v1","approval_id":"a","payload":` + okPayload + `}`, code: CodeKeyMismatch, field: "operation_key", key: key, eventID: "evt-1"},
		{name: "operation_key for another operation", body: `{"event_id":"evt-1","operation":"payment.charge","operation_key":"prod:payment.refund:evt-1:v1","approval_id":"a","payload":` + okPayload + `}`, code: CodeKeyMismatch, field: "operation_key", key: key, eventID: "evt-1"},
		{name: "operation_key for another intent", body: `{"event_id":"evt-1","operation":"payment.charge","intent_id":"i-1","operation_key":"prod:payment.charge:i-2:v1","approval_id":"a","payload":` + okPayload + `}`, code: CodeKeyMismatch, field: "operation_key", key: "prod:payment.charge:i-1:v1", eventID: "evt-1"},
		{name: "operation_key for another version", body: `{"event_id":"evt-1","operation":"payment.charge","key_version":"v2","operation_key":"prod:payment.charge:evt-1:v1","approval_id":"a","payload":` + okPayload + `}`, code: CodeKeyMismatch, field: "operation_key", key: "prod:payment.charge:evt-1:v2", eventID: "evt-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &Decoder{Env: "prod", MaxSize: tt.maxSize}
			op, err := d.Decode([]byte(tt.body))
			require.Error(t, err)
			require.Zero(t, op)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, tt.code, de.Code, "error: %v", err)
			require.ErrorIs(t, err, tt.code.sentinel())
			require.Equal(t, tt.field, de.Field, "error: %v", err)
			require.Equal(t, tt.key, de.Key, "error: %v", err)
			require.Equal(t, tt.eventID, de.EventID)
			require.NotEmpty(t, de.Msg)
			for _, other := range []DecodeCode{CodeNotJSON, CodeTooLarge, CodeUnknownOperation, CodeMissingField, CodeInvalidField, CodeBadKey, CodeKeyMismatch} {
				if other != tt.code {
					require.NotErrorIs(t, err, other.sentinel())
				}
			}
		})
	}
}

// TestDecodeErrorsNeverQuoteValues: no payload or key value appears in the
// error text, whatever the field.
func TestDecodeErrorsNeverQuoteValues(t *testing.T) {
	t.Parallel()
	const secret = "4111111111111111"
	bodies := []string{
		`{"event_id":"` + secret + `","operation":"payment.charge","payload":{}}`,
		`{"event_id":"e","operation":"` + secret + `","payload":{}}`,
		`{"event_id":"e","operation":"payment.charge","intent_id":"x-` + secret + `","payload":{}}`,
		`{"event_id":"e","operation":"payment.charge","operation_key":"prod:payment.charge:` + secret + `:v1","payload":{}}`,
		`{"event_id":"e","operation":"payment.charge","approval_id":"` + secret + `","payload":{}}`,
		`{"event_id":"e","operation":"payment.charge","approval_id":"a","payload":{"account_id":"` + secret + `\u0001","order_id":"o","amount_minor":1,"currency":"RUB"}}`,
		`{"event_id":"e","operation":"payment.charge","approval_id":"a","payload":{"account_id":"a","order_id":"o","amount_minor":1,"currency":"` + secret + `"}}`,
		`{"event_id":"e","operation":"payment.charge","approval_id":"a","payload":{"account_id":"a","order_id":"o","amount_minor":` + secret + `.5,"currency":"RUB"}}`,
		`{"event_id":"e","operation":"payment.charge","approval_id":"a","payload":{"` + secret + `":"x"}}`,
		`{"event_id":"e","operation":"payment.charge","approval_id":"a","payload":{"account_id":"a"},"` + secret + `":1}`,
		`{"event_id":"e","operation":"crm.task.create","payload":{"title":"t","responsible_id":"u","deadline":"` + secret + `"}}`,
		`{"event_id":"` + secret + `"`,
		`{"event_id":"e","x":` + secret + `]`,
	}
	d := &Decoder{Env: "prod"}
	for _, body := range bodies {
		_, err := d.Decode([]byte(body))
		require.Error(t, err, body)
		require.NotContains(t, err.Error(), secret, body)
		var de *DecodeError
		require.ErrorAs(t, err, &de)
		require.NotContains(t, de.Key, secret)
		require.NotContains(t, de.EventID, secret)
		require.NotContains(t, de.Field, secret)
		require.NotContains(t, de.Operation, secret)
	}
}

func TestDecoderConfig(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"", "Prod", "prod:x", "-prod", strings.Repeat("a", 33)} {
		d := &Decoder{Env: env}
		require.ErrorIs(t, d.Validate(), ErrInvalidConfig)
		_, err := d.Decode([]byte(vectorCommand))
		require.ErrorIs(t, err, ErrInvalidConfig)
		var de *DecodeError
		require.False(t, errors.As(err, &de), "a configuration error must not reject the command")
	}
	require.ErrorIs(t, (&Decoder{Env: "prod", MaxSize: -1}).Validate(), ErrInvalidConfig)
	require.NoError(t, (&Decoder{Env: "prod"}).Validate())
}

func TestDecoderCustomRegistry(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	require.NoError(t, reg.Register(Type{
		Name: "ledger.entry.post", TargetSystem: "1c",
		Fields: []Field{
			{Name: "entry_id", Kind: KindString, Required: true},
			{Name: "lines", Kind: KindInt, Required: true},
			{Name: "storno", Kind: KindBool},
			{Name: "balance", Kind: KindInt},
		},
	}))
	d := &Decoder{Env: "dev", Registry: reg}
	op, err := d.Decode([]byte(`{"event_id":"e-1","operation":"ledger.entry.post","payload":{"entry_id":"le-1","lines":3,"storno":false,"balance":-5}}`))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"entry_id": "le-1", "lines": int64(3), "storno": false, "balance": int64(-5)}, op.Fields)
	requireRoundTrip(t, d, op)

	_, err = d.Decode([]byte(`{"event_id":"e-1","operation":"ledger.entry.post","payload":{"entry_id":"le-1","lines":3,"storno":"no"}}`))
	require.ErrorIs(t, err, ErrInvalidField)
	_, err = d.Decode([]byte(vectorCommand))
	require.ErrorIs(t, err, ErrUnknownOperation, "the default types are not in a custom registry")
}

func TestDecodeCommand(t *testing.T) {
	t.Parallel()
	d := &Decoder{Env: "prod"}
	op, err := d.DecodeCommand(Command{
		EventID: "evt-90173", Operation: "payment.charge", IntentID: "approval-6f3c2a", ApprovalID: "appr-77",
		Payload: json.RawMessage(`{"account_id":"merchant-account-17","order_id":"order-48291","amount_minor":125000,"currency":"rub"}`),
	})
	require.NoError(t, err)
	require.Equal(t, vectorFingerprint, op.Fingerprint)

	_, err = d.DecodeCommand(Command{EventID: "e", Operation: "payment.charge", ApprovalID: "a"})
	require.ErrorIs(t, err, ErrMissingField)
	_, err = d.DecodeCommand(Command{EventID: "e", Operation: "payment.charge", ApprovalID: "a", Payload: json.RawMessage(`{bad`)})
	require.ErrorIs(t, err, ErrNotJSON)
}

func TestDecodeErrorText(t *testing.T) {
	t.Parallel()
	err := &DecodeError{Code: CodeInvalidField, Field: "payload.amount_minor", Msg: "must not be negative"}
	require.Equal(t, "rejected command: invalid_field: payload.amount_minor: must not be negative", err.Error())
	require.ErrorIs(t, err, ErrInvalidField)
	require.NotErrorIs(t, err, ErrMissingField)
	require.False(t, errors.Is(&DecodeError{Code: "other"}, ErrNotJSON))
}

func TestRejectedResult(t *testing.T) {
	t.Parallel()
	d := &Decoder{Env: "prod"}
	_, err := d.Decode([]byte(`{"event_id":"evt-1","operation":"payment.charge","payload":{"account_id":"a","order_id":"o","amount_minor":1}}`))
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	require.Equal(t, Result{
		OperationKey: "prod:payment.charge:evt-1:v1", EventID: "evt-1", Operation: "payment.charge",
		Status: ResultRejected, ErrorCode: "missing_field",
		Reason: "rejected command: missing_field: payload.currency: required by payment.charge",
	}, de.RejectedResult())
}

func BenchmarkDecode(b *testing.B) {
	d := &Decoder{Env: "prod"}
	body := []byte(vectorCommand)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeReference is the fixed yardstick for BenchmarkDecode on a
// shared machine: the same body through plain encoding/json into a Command,
// plus SHA-256 of its payload, as the daemon benchmark's raw loop does.
func BenchmarkDecodeReference(b *testing.B) {
	body := []byte(vectorCommand)
	b.ReportAllocs()
	for b.Loop() {
		var cmd Command
		if err := json.Unmarshal(body, &cmd); err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(cmd.Payload)
	}
}

// BenchmarkDecodeStdlib is the road not taken, measured beside Decode: the
// same command decoded strictly with encoding/json (unknown envelope members
// refused, payload numbers kept as literals), the currency upper-cased and
// the fingerprint taken over gowebpki/jcs's canonical form — the same
// fingerprint, without any of Decode's key, secret or per-kind checks.
func BenchmarkDecodeStdlib(b *testing.B) {
	body := []byte(vectorCommand)
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		var cmd Command
		if err := dec.Decode(&cmd); err != nil {
			b.Fatal(err)
		}
		pd := json.NewDecoder(bytes.NewReader(cmd.Payload))
		pd.UseNumber()
		var fields map[string]any
		if err := pd.Decode(&fields); err != nil {
			b.Fatal(err)
		}
		fields["currency"] = strings.ToUpper(fields["currency"].(string))
		fields["operation"] = cmd.Operation
		raw, err := json.Marshal(fields)
		if err != nil {
			b.Fatal(err)
		}
		canon, err := jcs.Transform(raw)
		if err != nil {
			b.Fatal(err)
		}
		if sum := sha256.Sum256(canon); hex.EncodeToString(sum[:]) != vectorFingerprint {
			b.Fatal("another fingerprint")
		}
	}
}
