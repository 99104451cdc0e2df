package operation

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecode: Decode never panics; every failure is a *DecodeError with a
// known code; every success has the fingerprint of its fields and survives a
// re-encode/decode round trip with the same key and fingerprint.
func FuzzDecode(f *testing.F) {
	seeds := []string{
		vectorCommand,
		`{"event_id":"evt-1","operation":"invoice.create","intent_id":"order-demo-1","payload":{"order_id":"order-demo-1","customer_id":"c-1","amount_minor":990,"currency":"eur","due_date":"2026-12-31","description":"Line one\nline two"}}`,
		`{"event_id":"evt-2","operation":"crm.task.create","key_version":"v2","payload":{"title":"Call back","responsible_id":"u-7","customer_id":null,"deadline":"2026-12-02T10:00:00.5+01:00"}}`,
		`{"event_id":"evt-3","operation":"crm.deal.create","payload":{"title":"Deal","customer_id":"c-9","amount_minor":0,"currency":"RUB","stage":"NEW"}}`,
		`{"event_id":"evt-4","operation":"payment.refund","operation_key":"prod:payment.refund:refund:ord-1:v3","approval_id":"appr-1","payload":{"payment_id":"pay_2c1f","amount_minor":9007199254740991,"currency":"usd","attempt":4}}`,
		`{"event_id":"evt-1","operation":"payment.charge","approval_id":"a","payload":{"amount_minor":1,"amount_minor":2}}`,
		`{"event_id":"evt-1","operation":"payment.charge","intent_id":"4111-1111-1111-1111","payload":{}}`,
		`{"event_id":"e","operation":"crm.task.create","payload":{"title":"\u00e9\ud83d\ude00","responsible_id":"u","deadline":"0001-01-01T00:00:00Z"}}`,
		`[]`, `{`, `null`, "{\"event_id\":\"\xff\"}",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	d := &Decoder{Env: "prod"}
	f.Fuzz(func(t *testing.T, body []byte) {
		op, err := d.Decode(body)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Code.sentinel() == nil || !errors.Is(err, de.Code.sentinel()) {
				t.Fatalf("Decode error %v is not a *DecodeError with a known code", err)
			}
			if de.Key != "" && ValidateKey(de.Key) != nil {
				t.Fatalf("rejection carries an invalid key")
			}
			return
		}
		fp, err := fingerprint(op.Type, op.Fields)
		if err != nil || fp != op.Fingerprint {
			t.Fatalf("fingerprint of decoded fields: %s, %v; Operation has %s", fp, err, op.Fingerprint)
		}
		if ValidateKey(op.Key.String()) != nil {
			t.Fatalf("decoded key %q does not validate", op.Key)
		}
		cmd, err := op.Command()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := d.DecodeCommand(cmd)
		if err != nil {
			raw, _ := json.Marshal(cmd)
			t.Fatalf("re-decode of %s: %v", raw, err)
		}
		if again.Key != op.Key || again.Fingerprint != op.Fingerprint || again.ApprovalID != op.ApprovalID || again.EventID != op.EventID {
			t.Fatalf("round trip changed the operation: %+v -> %+v", op, again)
		}
	})
}
