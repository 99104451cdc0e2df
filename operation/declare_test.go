package operation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// shipmentDecl declares one field of every kind.
func shipmentDecl() TypeDecl {
	return TypeDecl{
		TargetSystem: "warehouse",
		Fields: []FieldDecl{
			{Name: "order_id", Kind: "string", Required: true, MaxLen: 64},
			{Name: "quantity", Kind: "integer", Required: true},
			{Name: "declared_value", Kind: "money", AllowZero: true},
			{Name: "currency", Kind: "currency"},
			{Name: "ship_on", Kind: "date"},
			{Name: "ready_at", Kind: "time"},
			{Name: "priority", Kind: "enum", Values: []string{"normal", "express"}},
			{Name: "fragile", Kind: "bool"},
			{Name: "address", Kind: "object", Fields: []FieldDecl{
				{Name: "city", Kind: "string", Required: true},
				{Name: "zip", Kind: "string"},
			}},
			{Name: "comment", Kind: "string", FreeText: true},
			{Name: "batch", Kind: "string", Significant: no()},
		},
	}
}

func shipmentDecoder(t *testing.T) *Decoder {
	t.Helper()
	reg, err := RegistryWith(map[string]TypeDecl{"shipment.create": shipmentDecl()})
	require.NoError(t, err)
	return &Decoder{Env: "test", Registry: reg}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestDeclaredFieldKindVectors: one vector per field kind. Each payload
// carries the base fields plus one field of the kind under test, written
// in a non-canonical way; the fingerprint must be the SHA-256 of the
// RFC 8785 text given, and the normalised value the one given.
func TestDeclaredFieldKindVectors(t *testing.T) {
	t.Parallel()
	d := shipmentDecoder(t)
	const base = `"order_id":"SO-1","quantity":3`
	const canonBase = `"operation":"shipment.create","order_id":"SO-1","quantity":3`
	vectors := []struct {
		kind, member, canon string
		field               string
		value               any
	}{
		{"string", ``, `{` + canonBase + `}`, "order_id", "SO-1"},
		{"integer", `"quantity":3`, `{` + canonBase + `}`, "quantity", int64(3)},
		{"money", `"declared_value":125000`, `{"declared_value":125000,` + canonBase + `}`, "declared_value", int64(125000)},
		{"currency", `"currency":"rub"`, `{"currency":"RUB",` + canonBase + `}`, "currency", "RUB"},
		{"date", `"ship_on":"2026-12-03"`, `{` + canonBase + `,"ship_on":"2026-12-03"}`, "ship_on", "2026-12-03"},
		{"time", `"ready_at":"2026-12-03T13:00:00.500+03:00"`, `{` + canonBase + `,"ready_at":"2026-12-03T10:00:00.5Z"}`, "ready_at", time.Date(2026, 12, 3, 10, 0, 0, 500_000_000, time.UTC)},
		{"enum", `"priority":"express"`, `{"operation":"shipment.create","order_id":"SO-1","priority":"express","quantity":3}`, "priority", "express"},
		{"bool", `"fragile":true`, `{"fragile":true,` + canonBase + `}`, "fragile", true},
		{"object", `"address":{"zip":"101000","city":"Москва"}`, `{"address":{"city":"Москва","zip":"101000"},` + canonBase + `}`, "address", map[string]any{"city": "Москва", "zip": "101000"}},
		// Insignificant and free-text fields leave the fingerprint as it is.
		{"free text", `"comment":"call Ivan\nat the gate"`, `{` + canonBase + `}`, "comment", "call Ivan\nat the gate"},
		{"insignificant", `"batch":"B7"`, `{` + canonBase + `}`, "batch", "B7"},
	}
	for _, v := range vectors {
		t.Run(v.kind, func(t *testing.T) {
			payload := base
			if v.member != "" && v.member != `"quantity":3` {
				payload = v.member + "," + base
			}
			op, err := d.Decode([]byte(`{"event_id":"e1","operation":"shipment.create","intent_id":"i1","payload":{` + payload + `}}`))
			require.NoError(t, err)
			require.Equal(t, sha(v.canon), op.Fingerprint, "fingerprint of %s", v.canon)
			got, ok := op.Value(v.field)
			require.True(t, ok)
			require.Equal(t, v.value, got)
			if v.kind == "free text" || v.kind == "insignificant" {
				require.NotContains(t, op.Fields, v.field, "not significant")
				require.Contains(t, op.Extra, v.field)
				require.NotContains(t, op.FieldDigests(), v.field)
			} else {
				require.Contains(t, op.Fields, v.field)
			}
			// The re-encoded command decodes to the same operation.
			cmd, err := op.Command()
			require.NoError(t, err)
			again, err := d.DecodeCommand(cmd)
			require.NoError(t, err)
			require.Equal(t, op.Fingerprint, again.Fingerprint)
			require.Equal(t, op.Extra, again.Extra)
		})
	}
}

func TestDeclaredFieldRefusals(t *testing.T) {
	t.Parallel()
	d := shipmentDecoder(t)
	cases := map[string]struct{ payload, field string }{
		"enum value":            {`"priority":"urgent"`, "payload.priority"},
		"enum type":             {`"priority":1`, "payload.priority"},
		"object type":           {`"address":"Москва"`, "payload.address"},
		"object member missing": {`"address":{"zip":"1"}`, "payload.address.city"},
		"object member unknown": {`"address":{"city":"x","street":"y"}`, "payload.address.street"},
		"object member dup":     {`"address":{"city":"x","city":"y"}`, "payload.address.city"},
		"object member kind":    {`"address":{"city":7}`, "payload.address.city"},
		"integer fraction":      {`"quantity":1.5`, "payload.quantity"},
		"money negative":        {`"declared_value":-1`, "payload.declared_value"},
		"insignificant kind":    {`"batch":7`, "payload.batch"},
	}
	for name, c := range cases {
		body := `{"event_id":"e1","operation":"shipment.create","intent_id":"i1","payload":{"order_id":"SO-1","quantity":3,` + c.payload + `}}`
		if name == "integer fraction" {
			body = `{"event_id":"e1","operation":"shipment.create","intent_id":"i1","payload":{"order_id":"SO-1",` + c.payload + `}}`
		}
		_, err := d.Decode([]byte(body))
		var de *DecodeError
		require.True(t, errors.As(err, &de), "%s: %v", name, err)
		require.Equal(t, c.field, de.Field, name)
		require.ErrorIs(t, err, ErrInvalidField, name)
	}
	// A required field of a declared type.
	_, err := d.Decode([]byte(`{"event_id":"e1","operation":"shipment.create","intent_id":"i1","payload":{"order_id":"SO-1"}}`))
	require.ErrorIs(t, err, ErrMissingField)
}

func TestDeclaredApproval(t *testing.T) {
	t.Parallel()
	decl := shipmentDecl()
	decl.ApprovalIDRequired = true
	reg, err := RegistryWith(map[string]TypeDecl{"shipment.create": decl})
	require.NoError(t, err)
	d := &Decoder{Env: "test", Registry: reg}
	// approval_id authorises nothing and is optional: the policy decides.
	_, err = d.Decode([]byte(`{"event_id":"e1","operation":"shipment.create","intent_id":"i1","payload":{"order_id":"SO-1","quantity":1}}`))
	require.NoError(t, err)
	policy, err := CompileApprovalPolicy(nil, reg)
	require.NoError(t, err)
	require.Equal(t, ApprovalRequired, policy.Rule("shipment.create").Mode)
	op, err := d.Decode([]byte(`{"event_id":"e1","operation":"shipment.create","intent_id":"i1","approval_id":"ap-1","payload":{"order_id":"SO-1","quantity":1}}`))
	require.NoError(t, err)
	require.Equal(t, "ap-1", op.ApprovalID)
	require.Equal(t, "warehouse", op.TargetSystem)
}

func TestDeclarationRefused(t *testing.T) {
	t.Parallel()
	with := func(f ...FieldDecl) TypeDecl { return TypeDecl{TargetSystem: "warehouse", Fields: f} }
	id := FieldDecl{Name: "order_id", Kind: "string", Required: true}
	cases := []struct {
		name     string
		decl     TypeDecl
		typ      string
		sentinel error
		msg      string
	}{
		{"unknown kind", with(id, FieldDecl{Name: "weight", Kind: "float"}), "a.b", ErrInvalidType, `operations.a.b.fields.weight: unknown kind "float"`},
		{"free text significant", with(id, FieldDecl{Name: "comment", Kind: "string", FreeText: true, Significant: yes()}), "a.b", ErrUnsafeType, "free text marked significant"},
		{"no significant field", with(FieldDecl{Name: "comment", Kind: "string", FreeText: true}), "a.b", ErrUnsafeType, "has no significant field"},
		{"no fields", with(), "a.b", ErrUnsafeType, "has no significant field"},
		{"free text integer", with(id, FieldDecl{Name: "n", Kind: "integer", FreeText: true, Significant: no()}), "a.b", ErrInvalidType, "free text must be of kind string"},
		{"enum without values", with(id, FieldDecl{Name: "p", Kind: "enum"}), "a.b", ErrInvalidType, "an enum lists its values"},
		{"values on string", with(id, FieldDecl{Name: "p", Kind: "string", Values: []string{"a"}}), "a.b", ErrInvalidType, "values belong to an enum"},
		{"enum duplicate", with(id, FieldDecl{Name: "p", Kind: "enum", Values: []string{"a", "a"}}), "a.b", ErrInvalidType, "enum values must be distinct"},
		{"object without fields", with(id, FieldDecl{Name: "o", Kind: "object"}), "a.b", ErrInvalidType, "an object declares its fields"},
		{"object free text member", with(id, FieldDecl{Name: "o", Kind: "object", Fields: []FieldDecl{{Name: "c", Kind: "string", FreeText: true}}}), "a.b", ErrUnsafeType, "members of an object"},
		{"bad name", with(id), "Shipment", ErrInvalidType, "operations.Shipment"},
		{"bad field name", with(FieldDecl{Name: "Order", Kind: "string"}), "a.b", ErrInvalidType, "field name"},
		{"reserved field", with(id, FieldDecl{Name: "trace_id", Kind: "string"}), "a.b", ErrInvalidType, "reserved"},
		{"duplicate field", with(id, id), "a.b", ErrInvalidType, "declared twice"},
		{"target", TypeDecl{TargetSystem: "Ware House", Fields: []FieldDecl{id}}, "a.b", ErrInvalidType, "target_system"},
		{"allow_zero on string", with(FieldDecl{Name: "x", Kind: "string", AllowZero: true}), "a.b", ErrInvalidType, "allow_zero"},
		{"built-in", with(id), "payment.charge", ErrInvalidType, "built-in type"},
	}
	for _, c := range cases {
		_, err := RegistryWith(map[string]TypeDecl{c.typ: c.decl})
		require.ErrorIs(t, err, c.sentinel, c.name)
		require.ErrorContains(t, err, c.msg, c.name)
	}
	// Several bad declarations are all reported.
	_, err := RegistryWith(map[string]TypeDecl{"a.b": with(), "c.d": with(FieldDecl{Name: "x", Kind: "nope"})})
	require.ErrorContains(t, err, "operations.a.b")
	require.ErrorContains(t, err, "operations.c.d")
}

func TestRegistryWithKeepsBuiltins(t *testing.T) {
	t.Parallel()
	reg, err := RegistryWith(map[string]TypeDecl{"shipment.create": shipmentDecl()})
	require.NoError(t, err)
	require.Contains(t, reg.Names(), "payment.charge")
	typ, ok := reg.Lookup("shipment.create")
	require.True(t, ok)
	require.Equal(t, []string{"comment"}, typ.FreeTextFields())
	addr, _ := typ.Field("address")
	require.Equal(t, KindObject, addr.Kind)
	addr.Fields[0].Name = "changed" // Lookup hands out deep copies
	again, _ := reg.Lookup("shipment.create")
	a2, _ := again.Field("address")
	require.Equal(t, "city", a2.Fields[0].Name)
}

// FuzzTypeDecl: no declaration panics the parser, and a declaration the
// parser takes decodes commands without panicking, with a stable
// fingerprint.
func FuzzTypeDecl(f *testing.F) {
	f.Add("string", "x", "enum", "a,b", true, false, `{"x":"a"}`)
	f.Add("object", "city", "string", "", false, false, `{"x":{"city":"m"}}`)
	f.Add("money", "", "float", "", true, true, `{"x":0}`)
	f.Fuzz(func(t *testing.T, kind, sub, subKind, values string, required, freeText bool, payload string) {
		fd := FieldDecl{Name: "x", Kind: kind, Required: required, FreeText: freeText}
		if values != "" {
			fd.Values = splitComma(values)
		}
		if sub != "" {
			fd.Fields = []FieldDecl{{Name: sub, Kind: subKind, Values: fd.Values}}
		}
		decl := TypeDecl{TargetSystem: "t", Fields: []FieldDecl{fd, {Name: "id", Kind: "string"}}}
		reg, err := RegistryWith(map[string]TypeDecl{"f.z": decl})
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalidType) || errors.Is(err, ErrUnsafeType), "%v", err)
			return
		}
		d := &Decoder{Env: "test", Registry: reg}
		body := []byte(`{"event_id":"e","operation":"f.z","intent_id":"i","payload":` + payload + `}`)
		op, err := d.Decode(body)
		if err != nil {
			return
		}
		again, err := d.Decode(body)
		require.NoError(t, err)
		require.Equal(t, op.Fingerprint, again.Fingerprint)
		cmd, err := op.Command()
		require.NoError(t, err)
		third, err := d.DecodeCommand(cmd)
		require.NoError(t, err)
		require.Equal(t, op.Fingerprint, third.Fingerprint)
	})
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
