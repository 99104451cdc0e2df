package operation_test

import (
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/operation"
)

// The command envelope of docs/agents.md, decoded in the "prod"
// environment: the key comes from env, operation, intent and version; the
// fingerprint is the project's payment.charge test vector (currency
// upper-cased, approval not fingerprinted).
func ExampleDecoder_Decode() {
	d := &operation.Decoder{Env: "prod"}
	op, err := d.Decode([]byte(`{
		"event_id": "evt-90173", "operation": "payment.charge", "intent_id": "approval-6f3c2a",
		"key_version": "v1", "approval_id": "appr-77",
		"payload": {"account_id": "merchant-account-17", "order_id": "order-48291",
		            "amount_minor": 125000, "currency": "rub", "attempt": 2}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(op.Key)
	fmt.Println(op.TargetSystem, op.ApprovalID, op.Int("amount_minor"), op.String("currency"))
	fmt.Println(op.Fingerprint)
	// Output:
	// prod:payment.charge:approval-6f3c2a:v1
	// payments appr-77 125000 RUB
	// 28a4262860864e5110d391a4556da2ad2f539ae2f87e52871f80cb7381d86aa6
}

func ExampleDeriveKey() {
	key, err := operation.DeriveKey("test", operation.Command{
		EventID:   "order-demo-1",
		Operation: "invoice.create",
	}, nil)
	fmt.Println(key, err)
	// Output: test:invoice.create:order-demo-1:v1 <nil>
}

func ExampleParseKey() {
	k, err := operation.ParseKey("prod:crm.callback:create:event-90173:v1")
	fmt.Printf("%q %q %q %q %v\n", k.Env, k.Operation, k.IntentID, k.Version, err)

	_, err = operation.ParseKey("prod:payment.charge:4111-1111-1111-1111:v1")
	fmt.Println(err, errors.Is(err, operation.ErrBadKey))
	// Output:
	// "prod" "crm.callback" "create:event-90173" "v1" <nil>
	// bad operation key: contains a card-like number (13-19 digits passing the Luhn check) true
}

func ExampleDecodeError() {
	d := &operation.Decoder{Env: "prod"}
	_, err := d.Decode([]byte(`{"event_id":"evt-1","operation":"payment.charge","approval_id":"appr-1",
		"payload":{"account_id":"a-1","order_id":"o-1","amount_minor":100.5,"currency":"RUB"}}`))
	var de *operation.DecodeError
	if errors.As(err, &de) {
		fmt.Println(de.Code, de.Field, de.Key)
		fmt.Println(errors.Is(err, operation.ErrInvalidField))
		fmt.Println(de)
	}
	// Output:
	// invalid_field payload.amount_minor prod:payment.charge:evt-1:v1
	// true
	// rejected command: invalid_field: payload.amount_minor: must be a JSON integer, without fraction or exponent (money is an integer amount in minor units)
}
