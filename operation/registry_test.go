package operation

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultRegistry(t *testing.T) {
	t.Parallel()
	reg := DefaultRegistry()
	require.Equal(t, []string{"crm.deal.create", "crm.task.create", "invoice.cancel", "invoice.create", "payment.charge", "payment.refund"}, reg.Names())
	targets := map[string]string{
		"invoice.create": "1c", "invoice.cancel": "1c", "crm.task.create": "crm", "crm.deal.create": "crm",
		"payment.charge": "payments", "payment.refund": "payments",
	}
	for name, target := range targets {
		typ, ok := reg.Lookup(name)
		require.True(t, ok, name)
		require.Equal(t, target, typ.TargetSystem)
		require.Equal(t, target == "payments", typ.RequiresApproval, name)
	}
	charge, _ := reg.Lookup("payment.charge")
	f, ok := charge.Field("amount_minor")
	require.True(t, ok)
	require.Equal(t, KindMoney, f.Kind)
	require.True(t, f.Required)
	_, ok = charge.Field("description")
	require.False(t, ok)

	// Each call is a fresh registry; Lookup hands out copies.
	require.NoError(t, reg.Register(Type{Name: "x.y", TargetSystem: "crm"}))
	_, ok = DefaultRegistry().Lookup("x.y")
	require.False(t, ok)
	charge.Fields[0].Name = "changed"
	again, _ := reg.Lookup("payment.charge")
	require.Equal(t, "account_id", again.Fields[0].Name)
}

func TestRegister(t *testing.T) {
	t.Parallel()
	var reg Registry // the zero value is usable
	ok := Type{Name: "sms.send", TargetSystem: "sms", Fields: []Field{{Name: "phone", Kind: KindString, Required: true}}}
	require.NoError(t, reg.Register(ok))
	require.ErrorIs(t, reg.Register(ok), ErrDuplicateType)

	bad := map[string]Type{
		"name":             {Name: "Bad Name", TargetSystem: "x"},
		"no target":        {Name: "a.b"},
		"target":           {Name: "a.b", TargetSystem: "X Y"},
		"field name":       {Name: "a.b", TargetSystem: "x", Fields: []Field{{Name: "Phone", Kind: KindString}}},
		"empty field name": {Name: "a.b", TargetSystem: "x", Fields: []Field{{Kind: KindString}}},
		"operation field":  {Name: "a.b", TargetSystem: "x", Fields: []Field{{Name: "operation", Kind: KindString}}},
		"transport field":  {Name: "a.b", TargetSystem: "x", Fields: []Field{{Name: "trace_id", Kind: KindString}}},
		"duplicate field":  {Name: "a.b", TargetSystem: "x", Fields: []Field{{Name: "a", Kind: KindString}, {Name: "a", Kind: KindInt}}},
		"unknown kind":     {Name: "a.b", TargetSystem: "x", Fields: []Field{{Name: "a"}}},
		"negative max len": {Name: "a.b", TargetSystem: "x", Fields: []Field{{Name: "a", Kind: KindString, MaxLen: -1}}},
	}
	for name, typ := range bad {
		require.ErrorIs(t, reg.Register(typ), ErrInvalidType, name)
	}
	require.Equal(t, []string{"sms.send"}, reg.Names())
}

func TestFieldKindString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "money", KindMoney.String())
	require.Equal(t, "FieldKind(99)", FieldKind(99).String())
}
