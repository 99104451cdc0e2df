// Package httpjsontest holds declared targets and a declared operation
// type for tests: three targets that cover the declarative adapter's ways
// of keeping the key (a native idempotency header; a unique external id
// with a lookup by it; a search with lag under a per-key single-flight),
// each served by the generic emulator derived from the same declaration.
//
// Imports: adapters/httpjson, emulate (which derives each emulator from its
// declaration), operation and sandbox: a *test suite, it may reach the
// emulator side, as no other adapters package may.
package httpjsontest

import (
	"fmt"
	"sync"
	"time"

	"github.com/idemgate/idemgate/adapters/httpjson"
	"github.com/idemgate/idemgate/emulate"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/sandbox/generic"
)

// OpShipment is the declared operation type.
const OpShipment = "shipment.create"

// Token is the emulators' test bearer token (sandbox only).
const Token = "wh_test_token_5f1e0c2a9b"

// TokenEnv is the environment variable the declarations read it from.
const TokenEnv = "IDEMGATE_TEST_WAREHOUSE_TOKEN"

// ShipmentDecl declares shipment.create: an order id, a quantity, an
// optional declared value in minor units with its currency, and a free-
// text comment (insignificant, body only).
func ShipmentDecl() operation.TypeDecl {
	return operation.TypeDecl{
		TargetSystem: "warehouse",
		Fields: []operation.FieldDecl{
			{Name: "order_id", Kind: "string", Required: true, MaxLen: 64},
			{Name: "quantity", Kind: "integer", Required: true},
			{Name: "declared_value", Kind: "money"},
			{Name: "currency", Kind: "currency"},
			{Name: "comment", Kind: "string", FreeText: true},
		},
	}
}

// Registry returns the default registry with ShipmentDecl.
func Registry() *operation.Registry {
	reg, err := operation.RegistryWith(map[string]operation.TypeDecl{OpShipment: ShipmentDecl()})
	if err != nil {
		panic(err)
	}
	return reg
}

// Declarations are the three declared targets, by name.
func Declarations() map[string]httpjson.Config {
	auth := httpjson.AuthConfig{Scheme: "bearer", SecretEnv: TokenEnv}
	return map[string]httpjson.Config{
		// An idempotency header the target honours, the key also kept in
		// metadata that a search filters on.
		"parcels": {
			TargetSystem: "warehouse", Auth: auth,
			Key: httpjson.KeyConfig{In: httpjson.KeyInHeader, Name: "Idempotency-Key"},
			Execute: httpjson.ExecuteConfig{
				URL:      "/v1/parcels",
				Body:     `{"order": "${payload.order_id}", "qty": "${payload.quantity}", "note": "${payload.comment}", "metadata": {"op_key": "${key}"}}`,
				ObjectID: "id", Status: "state",
			},
			Lookup: []httpjson.LookupRequest{
				{Mode: httpjson.LookupSearch, URL: "/v1/parcels?metadata.op_key=${key}", Items: "data", KeyPath: "metadata.op_key"},
			},
			Capabilities: httpjson.CapabilitiesConfig{NativeKey: true},
		},
		// A warehouse API with a unique externalCode: a duplicate is
		// answered 409 and the object is found by its code (or, when a
		// connector dropped the code, by the marker in its description).
		"warehouse": Warehouse(),
		// No deduplication and a search index that lags: search, then
		// create, under a per-key lock; the settle time covers the lag.
		"orders": {
			TargetSystem: "warehouse", Auth: auth,
			Key: httpjson.KeyConfig{In: httpjson.KeyInBody, Name: "external_id"},
			Execute: httpjson.ExecuteConfig{
				URL:      "/api/orders",
				Body:     `{"order": "${payload.order_id}", "qty": "${payload.quantity}", "note": "${payload.comment} ${marker}"}`,
				ObjectID: "id",
				Verify:   []httpjson.VerifyRule{{Path: "qty", Value: "${payload.quantity}"}},
			},
			Lookup: []httpjson.LookupRequest{
				{Mode: httpjson.LookupSearch, URL: "/api/orders?external_id=${key}", Items: "items", KeyPath: "external_id"},
				{Mode: httpjson.LookupSearch, URL: "/api/orders?q=${marker}", Items: "items", MarkerPath: "note"},
			},
			Capabilities: httpjson.CapabilitiesConfig{LookupBeforeCreate: true, SettleTime: 5 * time.Second},
		},
	}
}

// Warehouse is the README's worked example: a warehouse API whose
// shipments carry a unique externalCode.
func Warehouse() httpjson.Config {
	return httpjson.Config{
		TargetSystem: "warehouse",
		Auth:         httpjson.AuthConfig{Scheme: "bearer", SecretEnv: TokenEnv},
		Key:          httpjson.KeyConfig{In: httpjson.KeyInBody, Name: "externalCode"},
		Execute: httpjson.ExecuteConfig{
			URL:      "/api/shipments",
			Body:     `{"name": "${payload.order_id}", "quantity": "${payload.quantity}", "sum": "${payload.declared_value}", "description": "${payload.comment} ${marker}"}`,
			ObjectID: "id", Status: "state", KeyEcho: "externalCode",
			Verify: []httpjson.VerifyRule{{Path: "name", Value: "${payload.order_id}"}, {Path: "quantity", Value: "${payload.quantity}"}},
		},
		Errors: []httpjson.ErrorRule{{Status: []int{409}, BodyPath: "error", Equals: "duplicate_external_code", Class: httpjson.ClassLookup}},
		Lookup: []httpjson.LookupRequest{
			{Mode: httpjson.LookupGet, URL: "/api/shipments/by-code/${key}", KeyPath: "externalCode", NotFoundPath: "error", NotFoundEquals: "not_found"},
			{Mode: httpjson.LookupSearch, URL: "/api/shipments?search=${marker}", Items: "rows", MarkerPath: "description"},
		},
		Capabilities: httpjson.CapabilitiesConfig{NativeKey: true},
	}
}

// Clock is a settable clock for emulated lag.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts at a fixed time.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// Emulator builds (not starts) the generic emulator of declaration name,
// with the token required, the quantity refused unless positive, and
// clock (nil: real time) driving its lag.
func Emulator(name string, cfg httpjson.Config, clock func() time.Time) (*generic.Server, error) {
	cfg.Name = name
	spec, err := emulate.Spec(cfg)
	if err != nil {
		return nil, err
	}
	spec.Token = Token
	spec.Kind = "shipment"
	for _, p := range []string{"qty", "quantity"} {
		spec.Positive = append(spec.Positive, p)
	}
	return generic.New(generic.Options{Options: sandbox.Options{Clock: clock}, Spec: spec})
}

// Adapter builds the adapter of declaration name against baseURL, serving
// the types of reg routed to it.
func Adapter(name string, cfg httpjson.Config, baseURL string, timeout time.Duration, reg *operation.Registry) (*httpjson.Adapter, error) {
	cfg.Name = name
	cfg.BaseURL = baseURL
	cfg.Timeout = timeout
	cfg.Getenv = func(k string) string {
		if k == TokenEnv {
			return Token
		}
		return ""
	}
	t, ok := reg.Lookup(OpShipment)
	if !ok {
		return nil, fmt.Errorf("%s is not registered", OpShipment)
	}
	cfg.Types = []operation.Type{t}
	return httpjson.New(cfg)
}
