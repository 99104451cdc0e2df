package httpjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
)

// FuzzTemplate: no text or body template panics the parser or the
// renderer; a text without placeholders renders as itself; a rendered
// body always encodes as JSON; a placeholder value never breaks out of
// its URL path segment.
func FuzzTemplate(f *testing.F) {
	f.Add("/api/${payload.order_id}?k=${key}", `{"a": "${payload.quantity}", "b": ["x ${marker}"], "c": {"d": "${payload.address.city}"}}`, "SO/1?x=y")
	f.Add("${", `{"a": "${unknown"}`, "")
	f.Add("plain", `{"a": 1.5, "b": null, "c": true}`, "ü")
	reg, err := operation.RegistryWith(map[string]operation.TypeDecl{"f.z": {TargetSystem: "t", Fields: []operation.FieldDecl{
		{Name: "order_id", Kind: "string"}, {Name: "quantity", Kind: "integer"},
		{Name: "address", Kind: "object", Fields: []operation.FieldDecl{{Name: "city", Kind: "string"}}},
	}}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, tmpl, bodyJSON, value string) {
		d := operation.Decoder{Env: "test", Registry: reg}
		payload, _ := json.Marshal(map[string]any{"order_id": value, "quantity": 3, "address": map[string]any{"city": value}})
		op, err := d.Decode([]byte(`{"event_id":"e","operation":"f.z","intent_id":"i","payload":` + string(payload) + `}`))
		if err != nil {
			op = operation.Operation{Key: operation.Key{Env: "test", Operation: "f.z", IntentID: "i", Version: "v1"}}
		}
		c := &call{op: op, key: op.Key.String()}
		if tx, err := parseText(tmpl); err == nil {
			out := tx.render(c, nil)
			if !strings.Contains(tmpl, "${") {
				require.Equal(t, tmpl, out)
			}
		}
		if u, err := parseURL("/p/${payload.order_id}"); err == nil {
			require.NotContains(t, strings.TrimPrefix(u.render(c), "/p/"), "/", "a value stays in its segment")
		}
		b, err := parseBodyText(bodyJSON)
		if err != nil {
			return
		}
		if b.setKey("meta.op_key") != nil {
			return
		}
		out := b.render(nil, c)
		require.True(t, json.Valid(out), "rendered body is JSON: %s", out)
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m))
		meta, _ := m["meta"].(map[string]any)
		require.Equal(t, c.key, meta["op_key"], "the key is where the declaration puts it")
	})
}

// FuzzDeclaration: no declaration panics Validate; every refusal wraps
// ErrInvalidConfig or ErrUnsafeConfig, and names the adapter.
func FuzzDeclaration(f *testing.F) {
	f.Add("body", "externalCode", "/api/x", `{"a": "${payload.order_id}"}`, "/api/x/${key}", "get", "id", "error")
	f.Add("header", "Idempotency-Key", "/v1/p", `{}`, "/v1/p?m=${key}", "search", "data.0.id", "")
	f.Add("", "", "x", `[`, "", "", "", "")
	f.Fuzz(func(t *testing.T, keyIn, keyName, url, body, lookupURL, mode, objectID, bodyPath string) {
		c := Config{
			TargetSystem: "warehouse", BaseURL: "https://wms.example.com",
			Key:          KeyConfig{In: keyIn, Name: keyName},
			Execute:      ExecuteConfig{URL: url, Body: body, ObjectID: objectID},
			Errors:       []ErrorRule{{Status: []int{409}, BodyPath: bodyPath, Equals: "dup", Class: ClassLookup}},
			Lookup:       []LookupRequest{{Mode: mode, URL: lookupURL, KeyPath: objectID}},
			Capabilities: CapabilitiesConfig{NativeKey: true},
		}
		c.Name = "fz"
		err := c.WithDefaults().Validate()
		if err == nil {
			return
		}
		require.True(t, errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrUnsafeConfig), "%v", err)
		require.Contains(t, err.Error(), "adapters.http.fz")
	})
}
