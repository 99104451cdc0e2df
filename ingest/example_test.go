package ingest_test

import (
	"fmt"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/redact"
)

// A YooKassa payment.succeeded notification becomes a 1C invoice, a Stripe
// payment a CRM task "call the customer". The same configuration in YAML
// (as cmd reads it):
//
//	ingest:
//	  addr: ":8080"
//	  trusted_proxies: ["10.0.0.0/8"]        # our ingress; default: none
//	  sources:
//	    - name: yookassa                     # POST /webhooks/yookassa
//	      refetch: {shop_id: "123456", secret_key_file: /run/secrets/yookassa}
//	      routes:
//	        - event: payment.succeeded
//	          operation: invoice.create
//	          payload:
//	            - {field: order_id, path: object.metadata.order_id}
//	            - {field: customer_id, path: object.metadata.customer_id}
//	            - {field: amount_minor, path: object.amount.value, convert: minor_units}
//	            - {field: currency, path: object.amount.currency}
//	    - name: stripe
//	      secrets_file: /run/secrets/stripe  # one whsec_… a line; two during a rotation
//	      routes:
//	        - event: payment_intent.succeeded
//	          operation: crm.task.create
//	          intent_paths: [type, data.object.id]
//	          payload:
//	            - {field: title, value: "Позвонить клиенту"}
//	            - {field: responsible_id, value: "manager-7"}
//	            - {field: customer_id, path: data.object.metadata.customer_id, optional: true}
func ExampleConfig() {
	cfg := ingest.Config{
		TrustedProxies: []string{"10.0.0.0/8"},
		Sources: []ingest.Source{
			{
				Name:    "yookassa",
				Refetch: ingest.YooKassaConfig{ShopID: "123456", SecretKey: "live_…"},
				Routes: []ingest.Route{{
					Event: "payment.succeeded", Operation: "invoice.create",
					Payload: []ingest.FieldMap{
						{Field: "order_id", Path: "object.metadata.order_id"},
						{Field: "customer_id", Path: "object.metadata.customer_id"},
						{Field: "amount_minor", Path: "object.amount.value", Convert: ingest.ConvertMinorUnits},
						{Field: "currency", Path: "object.amount.currency"},
					},
				}},
			},
			{
				Name:    "stripe",
				Secrets: []redact.Secret{"whsec_old…", "whsec_new…"},
				Routes: []ingest.Route{{
					Event: "payment_intent.succeeded", Operation: "crm.task.create",
					IntentPaths: []string{"type", "data.object.id"},
					Payload: []ingest.FieldMap{
						{Field: "title", Value: "Позвонить клиенту"},
						{Field: "responsible_id", Value: "manager-7"},
						{Field: "customer_id", Path: "data.object.metadata.customer_id", Optional: true},
					},
				}},
			},
		},
	}.WithDefaults()
	fmt.Println(cfg.Validate())
	fmt.Println(cfg.Sources[0].Scheme, cfg.Sources[0].AllowedAddresses[0], cfg.Sources[1].Secrets)
	// Output:
	// <nil>
	// yookassa 185.71.76.0/27 [[REDACTED] [REDACTED]]
}

func ExampleEventID() {
	fmt.Println(ingest.EventID("yookassa", "payment.succeeded", "22d6d597-000f-5000-9000-145f6df21d6f"))
	fmt.Println(ingest.EventID("tbank", "123456789", "CONFIRMED", "19200"))
	fmt.Println(ingest.EventID("crm", "id with spaces"))
	// Output:
	// yookassa:payment.succeeded:22d6d597-000f-5000-9000-145f6df21d6f
	// tbank:123456789:CONFIRMED:19200
	// crm:sha256-2770944a68c7ef57a49cecdc123e139b
}
