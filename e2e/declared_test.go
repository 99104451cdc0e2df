package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters/httpjson/httpjsontest"
	"github.com/idemgate/idemgate/emulate"
	"github.com/idemgate/idemgate/sandbox/generic"
)

// The eight acceptance checks also run on a target and an operation type that
// exist only in the configuration: shipment.create, declared under
// operations:, on docs/declared-targets.md's warehouse API declared under adapters.http
// (a unique externalCode, lookup by code, the marker as the fallback),
// served by the generic emulator derived from the same declaration.
func init() {
	targets = append(targets, target{
		name: "declared_warehouse_shipment", operation: "shipment.create", adapter: "warehouse",
		// The free-text comment is sent to the target and nowhere else.
		payloadCanaries: []string{"Leave at gate 7"},
		start:           startDeclaredWarehouse,
		payload: func(intent string, changed bool) json.RawMessage {
			qty := 3
			if changed {
				qty = 4
			}
			return json.RawMessage(fmt.Sprintf(`{"order_id":%q,"quantity":%d,"declared_value":125000,"currency":"rub","comment":"Leave at gate 7, %s"}`, intent, qty, intent))
		},
	})
}

// declaredOperations is shipment.create as the configuration declares it.
const declaredOperations = `operations:
  shipment.create:
    target_system: warehouse
    fields:
      - {name: order_id, kind: string, required: true, max_len: 64}
      - {name: quantity, kind: integer, required: true}
      - {name: declared_value, kind: money}
      - {name: currency, kind: currency}
      - {name: comment, kind: string, free_text: true}
`

// warehouseYAML is httpjsontest.Warehouse() as configuration.
const warehouseYAML = `  http:
    warehouse:
      target_system: warehouse
      base_url: %q
      timeout: 10s
      auth: {scheme: bearer, secret_env: IDEMGATE_E2E_WAREHOUSE_TOKEN}
      key: {in: body, name: externalCode}
      execute:
        url: /api/shipments
        body: '{"name": "${payload.order_id}", "quantity": "${payload.quantity}", "sum": "${payload.declared_value}", "description": "${payload.comment} ${marker}"}'
        object_id: id
        status: state
        key_echo: externalCode
        verify:
          - {path: name, value: "${payload.order_id}"}
          - {path: quantity, value: "${payload.quantity}"}
      errors:
        - {status: [409], body_path: error, equals: duplicate_external_code, class: lookup}
      lookup:
        - {mode: get, url: "/api/shipments/by-code/${key}", key_path: externalCode, not_found_path: error, not_found_equals: not_found}
        - {mode: search, url: "/api/shipments?search=${marker}", items: rows, marker_path: description}
      capabilities: {native_key: true}
`

func startDeclaredWarehouse(t *testing.T) targetSandbox {
	token := secret(t, "e2e_wh_")
	cfg := httpjsontest.Warehouse()
	cfg.Name = "warehouse"
	spec, err := emulate.Spec(cfg)
	require.NoError(t, err)
	spec.Token, spec.Kind = token, "shipment"
	s, err := generic.New(generic.Options{Options: sandboxOptions(), Spec: spec})
	require.NoError(t, err)
	url, log := serve(t, s.Core, func(r *http.Request) bool { return r.Method == http.MethodPost })
	return targetSandbox{
		core: s.Core, requests: log,
		adapterYAML: fmt.Sprintf(warehouseYAML, url),
		configYAML:  declaredOperations,
		env:         []string{"IDEMGATE_E2E_WAREHOUSE_TOKEN=" + token},
		secrets:     []string{token},
	}
}
