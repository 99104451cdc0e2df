package process_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
)

// checkout is the worked example: an invoice in 1C, a charge, a shipping
// task in the CRM; the invoice is cancelled and the charge refunded when a
// later step fails.
func checkout() process.Decl {
	return process.Decl{
		Input: process.InputDecl{Fields: []operation.FieldDecl{
			{Name: "order_id", Kind: "string", Required: true},
			{Name: "customer_id", Kind: "string", Required: true},
			{Name: "account_id", Kind: "string", Required: true},
			{Name: "amount_minor", Kind: "money", Required: true},
			{Name: "currency", Kind: "currency", Required: true},
			{Name: "responsible_id", Kind: "string", Required: true},
			{Name: "deliver_by", Kind: "time"},
		}},
		Steps: []process.StepDecl{
			{Name: "invoice", ActionDecl: process.ActionDecl{Operation: "invoice.create", Payload: map[string]any{
				"order_id": "${input.order_id}", "customer_id": "${input.customer_id}",
				"amount_minor": "${input.amount_minor}", "currency": "${input.currency}",
			}}, Compensate: &process.ActionDecl{Operation: "invoice.cancel", Payload: map[string]any{
				"invoice_id": "${steps.invoice.target_object_id}", "order_id": "${input.order_id}",
				"reason": "checkout ${process.intent_id} compensated",
			}}},
			{Name: "charge", ActionDecl: process.ActionDecl{Operation: "payment.charge", Payload: map[string]any{
				"account_id": "${input.account_id}", "order_id": "${input.order_id}",
				"amount_minor": "${input.amount_minor}", "currency": "${input.currency}",
			}}, Compensate: &process.ActionDecl{Operation: "payment.refund", Payload: map[string]any{
				"payment_id": "${steps.charge.target_object_id}", "order_id": "${input.order_id}",
				"amount_minor": "${input.amount_minor}", "currency": "${input.currency}",
			}}},
			{Name: "shipping", ActionDecl: process.ActionDecl{Operation: "crm.task.create", Payload: map[string]any{
				"title":          "Ship order ${input.order_id} (invoice ${steps.invoice.result.details.number})",
				"responsible_id": "${input.responsible_id}", "customer_id": "${input.customer_id}",
				"deadline": "${input.deliver_by}",
			}}},
		},
	}
}

func TestCompileCheckout(t *testing.T) {
	t.Parallel()
	def, err := process.Compile("order.checkout", checkout(), operation.DefaultRegistry())
	require.NoError(t, err)
	require.Equal(t, "process.order.checkout", def.Operation)
	require.Len(t, def.Steps, 3)
	require.True(t, def.Input.RequiresApproval, "a step moves money: the process command carries the approval")
	require.Equal(t, []string{"crm.task.create", "invoice.cancel", "invoice.create", "payment.charge", "payment.refund"}, def.Uses())
	require.Len(t, def.Digest, 64)
	again, err := process.Compile("order.checkout", checkout(), operation.DefaultRegistry())
	require.NoError(t, err)
	require.Equal(t, def.Digest, again.Digest, "one declaration, one digest")
	changed := checkout()
	changed.Steps[2].Payload["title"] = "Ship ${input.order_id}"
	other, err := process.Compile("order.checkout", changed, operation.DefaultRegistry())
	require.NoError(t, err)
	require.NotEqual(t, def.Digest, other.Digest)

	// The body the journal keeps reads back to the same definition.
	name, decl, err := process.Parse(def.Body)
	require.NoError(t, err)
	require.Equal(t, "order.checkout", name)
	back, err := process.Compile(name, decl, operation.DefaultRegistry())
	require.NoError(t, err)
	require.Equal(t, def.Digest, back.Digest)
}

// Every problem a declaration can have is refused at start, naming the
// configuration key at fault.
func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		mutate func(d *process.Decl)
		want   string
	}{
		"unknown input field": {func(d *process.Decl) { d.Steps[0].Payload["order_id"] = "${input.order}" }, "processes.order.checkout.steps.invoice: ${input.order} names input field order"},
		"unknown step":        {func(d *process.Decl) { d.Steps[1].Compensate.Payload["payment_id"] = "${steps.pay.target_object_id}" }, "names step pay, which the process does not have"},
		"forward reference": {func(d *process.Decl) {
			d.Steps[0].Payload["order_id"] = "${steps.shipping.target_object_id}"
		}, "names step shipping, which runs later"},
		"own result":              {func(d *process.Decl) { d.Steps[1].Payload["order_id"] = "${steps.charge.target_object_id}" }, "a step cannot wait on itself (a cycle)"},
		"unknown compensation":    {func(d *process.Decl) { d.Steps[0].Compensate.Operation = "invoice.void" }, "processes.order.checkout.steps.invoice.compensate.operation: the compensation's operation type invoice.void does not exist"},
		"unknown step operation":  {func(d *process.Decl) { d.Steps[2].Operation = "crm.task.make" }, "the step's operation type crm.task.make does not exist"},
		"field the type lacks":    {func(d *process.Decl) { d.Steps[0].Payload["note"] = "x" }, "payload.note: invoice.create has no field note"},
		"required field missing":  {func(d *process.Decl) { delete(d.Steps[1].Payload, "account_id") }, "steps.charge.payload.account_id: required by payment.charge"},
		"kinds disagree":          {func(d *process.Decl) { d.Steps[0].Payload["amount_minor"] = "${input.order_id}" }, "${input.order_id} is a string, the field is a money"},
		"text into money":         {func(d *process.Decl) { d.Steps[0].Payload["amount_minor"] = "${input.amount_minor}00" }, "text with placeholders makes a string, the field is a money"},
		"bad placeholder":         {func(d *process.Decl) { d.Steps[0].Payload["order_id"] = "${order_id}" }, "want input.NAME"},
		"unterminated":            {func(d *process.Decl) { d.Steps[0].Payload["order_id"] = "${input.order_id" }, "unterminated ${"},
		"duplicate step":          {func(d *process.Decl) { d.Steps[2].Name = "invoice" }, "two steps are named invoice"},
		"bad step name":           {func(d *process.Decl) { d.Steps[2].Name = "Ship-It" }, "the step name must be"},
		"no steps":                {func(d *process.Decl) { d.Steps = nil }, "a process has at least one step"},
		"nested process":          {func(d *process.Decl) { d.Steps[2].Operation = "process.other" }, "processes do not nest"},
		"input without kind":      {func(d *process.Decl) { d.Input.Fields[0].Kind = "text" }, "processes.order.checkout.input"},
		"unknown input member":    {func(d *process.Decl) { d.Steps[0].Payload["order_id"] = "${input.order_id.part}" }, "names member part"},
		"compensation forward":    {func(d *process.Decl) { d.Steps[0].Compensate.Payload["reason"] = "${steps.charge.target_object_id}" }, "names step charge, which runs later"},
		"approval names the void": {func(d *process.Decl) { d.Steps[1].ApprovalID = "${input.approval}" }, "names input field approval"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := checkout()
			tc.mutate(&d)
			_, err := process.Compile("order.checkout", d, operation.DefaultRegistry())
			require.ErrorIs(t, err, process.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := process.Compile("Order Checkout", checkout(), operation.DefaultRegistry())
	require.ErrorIs(t, err, process.ErrInvalid)
}

func TestCompileAllReportsEveryProcessAndReservesThePrefix(t *testing.T) {
	t.Parallel()
	bad := checkout()
	bad.Steps[0].Compensate.Operation = "invoice.void"
	worse := checkout()
	worse.Steps[1].Payload["order_id"] = "${steps.shipping.target_object_id}"
	_, err := process.CompileAll("prod", map[string]process.Decl{"a.one": bad, "b.two": worse, "c.good": checkout()}, operation.DefaultRegistry())
	require.ErrorContains(t, err, "processes.a.one.steps.invoice.compensate.operation")
	require.ErrorContains(t, err, "processes.b.two.steps.charge")

	reg, err := operation.RegistryWith(map[string]operation.TypeDecl{"process.sneaky": {TargetSystem: "crm",
		Fields: []operation.FieldDecl{{Name: "x", Kind: "string", Required: true}}}})
	require.NoError(t, err)
	_, err = process.CompileAll("prod", nil, reg)
	require.ErrorContains(t, err, `operations.process.sneaky: the "process." prefix is reserved`)

	set, err := process.CompileAll("prod", map[string]process.Decl{"order.checkout": checkout()}, operation.DefaultRegistry())
	require.NoError(t, err)
	require.Equal(t, 1, set.Len())
}

func TestKeys(t *testing.T) {
	t.Parallel()
	def, err := process.Compile("order.checkout", checkout(), operation.DefaultRegistry())
	require.NoError(t, err)
	pk, err := operation.ParseKey("prod:process.order.checkout:order-48291:v1")
	require.NoError(t, err)
	keys, err := def.KeysOf(pk)
	require.NoError(t, err)
	require.Equal(t, "prod:invoice.create:process.order.checkout:order-48291:v1:invoice:v1", keys.Steps[0].String())
	require.Equal(t, "prod:payment.refund:process.order.checkout:order-48291:v1:charge:compensate:v1", keys.Compensations[1].String())
	require.Equal(t, operation.Key{}, keys.Compensations[2], "shipping has no compensation")
	for _, k := range append(keys.Steps, keys.Compensations[:2]...) {
		parsed, err := operation.ParseKey(k.String())
		require.NoError(t, err, "a step key is an ordinary operation key")
		require.Equal(t, k, parsed)
	}

	// The longest intent the faces offer fits every step key, one more
	// byte does not.
	limit := def.MaxIntentLen("prod")
	intent := strings.Repeat("a", limit)
	_, err = def.KeysOf(operation.Key{Env: "prod", Operation: def.Operation, IntentID: intent, Version: "v1"})
	require.NoError(t, err)
	_, err = def.KeysOf(operation.Key{Env: "prod", Operation: def.Operation, IntentID: intent + "a", Version: "v1"})
	require.ErrorIs(t, err, operation.ErrBadKey)
}

// A step's payload is built from the decoded input and the earlier steps'
// stored results; the daemon's decoder accepts it.
func TestBuildPayloads(t *testing.T) {
	t.Parallel()
	set, err := process.CompileAll("prod", map[string]process.Decl{"order.checkout": checkout()}, operation.DefaultRegistry())
	require.NoError(t, err)
	def, _ := set.Lookup("order.checkout")
	op, err := set.Decode([]byte(`{"event_id":"evt-1","operation":"process.order.checkout","intent_id":"order-48291","approval_id":"appr-7",
		"payload":{"order_id":"order-48291","customer_id":"cust-17","account_id":"merchant-account-17","amount_minor":125000,
		"currency":"rub","responsible_id":"12","deliver_by":"2026-12-05T10:00:00+03:00"}}`))
	require.NoError(t, err)
	require.Equal(t, "prod:process.order.checkout:order-48291:v1", op.Key.String())
	v := &process.Values{Input: process.Input(op), IntentID: op.Key.IntentID, Key: op.Key.String(), EventID: op.EventID,
		Steps: map[string]process.StepResult{}}

	body, approval, err := def.Steps[0].Action.Build(v, op.ApprovalID)
	require.NoError(t, err)
	require.Empty(t, approval, "invoice.create needs no approval")
	require.JSONEq(t, `{"order_id":"order-48291","customer_id":"cust-17","amount_minor":125000,"currency":"RUB"}`, string(body))

	_, _, err = def.Steps[0].Compensation.Build(v, op.ApprovalID)
	require.ErrorContains(t, err, "step invoice has not succeeded")

	v.Steps["invoice"] = process.StepResult{TargetObjectID: "inv-1", Result: json.RawMessage(`{"business_status":"posted","details":{"number":"0000-000001"}}`)}
	body, approval, err = def.Steps[1].Action.Build(v, op.ApprovalID)
	require.NoError(t, err)
	require.Equal(t, "appr-7", approval, "a money-moving step carries the process's approval")
	require.JSONEq(t, `{"account_id":"merchant-account-17","order_id":"order-48291","amount_minor":125000,"currency":"RUB"}`, string(body))

	body, _, err = def.Steps[0].Compensation.Build(v, op.ApprovalID)
	require.NoError(t, err)
	require.JSONEq(t, `{"invoice_id":"inv-1","order_id":"order-48291","reason":"checkout order-48291 compensated"}`, string(body))

	body, _, err = def.Steps[2].Action.Build(v, op.ApprovalID)
	require.NoError(t, err)
	require.JSONEq(t, `{"title":"Ship order order-48291 (invoice 0000-000001)","responsible_id":"12","customer_id":"cust-17",
		"deadline":"2026-12-05T07:00:00Z"}`, string(body))
	cmd := operation.Command{EventID: "evt-2", Operation: "crm.task.create", IntentID: "x", Payload: body}
	_, err = (&operation.Decoder{Env: "prod"}).DecodeCommand(cmd)
	require.NoError(t, err, "the built payload is a valid command")

	// An optional input field left out is left out of the step's payload.
	delete(v.Input, "deliver_by")
	body, _, err = def.Steps[2].Action.Build(v, op.ApprovalID)
	require.NoError(t, err)
	require.NotContains(t, string(body), "deadline")
}

func TestSetKeepsOlderDefinitions(t *testing.T) {
	t.Parallel()
	old, err := process.Compile("order.checkout", checkout(), operation.DefaultRegistry())
	require.NoError(t, err)
	newer := checkout()
	newer.Input.Fields = append(newer.Input.Fields, operation.FieldDecl{Name: "channel", Kind: "string"})
	cur, err := process.Compile("order.checkout", newer, operation.DefaultRegistry())
	require.NoError(t, err)
	gone := checkout()
	retired, err := process.Compile("order.retired", gone, operation.DefaultRegistry())
	require.NoError(t, err)

	set, err := process.NewSet("prod", cur)
	require.NoError(t, err)
	require.NoError(t, set.Keep(old))
	require.NoError(t, set.Keep(retired))
	d, ok := set.ByDigest(old.Digest)
	require.True(t, ok)
	require.Same(t, old, d)
	live, _ := set.Lookup("order.checkout")
	require.Same(t, cur, live, "new processes start on the configured definition")
	_, ok = set.Lookup("order.retired")
	require.False(t, ok, "a kept definition is not offered for new processes")
	require.Len(t, set.Definitions(), 1)

	cmd := `{"event_id":"evt-1","operation":"process.order.retired","intent_id":"o-1","approval_id":"a-1",
		"payload":{"order_id":"o-1","customer_id":"c","account_id":"acc","amount_minor":100,"currency":"RUB","responsible_id":"1"}}`
	op, err := set.Decode([]byte(cmd))
	require.NoError(t, err, "a running process of a retired definition still decodes")
	again, err := set.DecodeAs(retired.Digest, []byte(cmd))
	require.NoError(t, err)
	require.Equal(t, op.Fingerprint, again.Fingerprint)
	_, err = set.DecodeAs("unknown", []byte(cmd))
	require.ErrorIs(t, err, process.ErrUnknownDefinition)
}
