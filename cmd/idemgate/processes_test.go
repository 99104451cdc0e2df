package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkoutYAML declares the worked checkout process.
const checkoutYAML = `
processes:
  order.checkout:
    input:
      fields:
        - {name: order_id, kind: string, required: true}
        - {name: customer_id, kind: string, required: true}
        - {name: account_id, kind: string, required: true}
        - {name: amount_minor, kind: money, required: true}
        - {name: currency, kind: currency, required: true}
        - {name: responsible_id, kind: string, required: true}
    steps:
      - name: invoice
        operation: invoice.create
        payload: {order_id: "${input.order_id}", customer_id: "${input.customer_id}", amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
        compensate:
          operation: invoice.cancel
          payload: {invoice_id: "${steps.invoice.target_object_id}", order_id: "${input.order_id}", reason: "checkout compensated"}
      - name: charge
        operation: payment.charge
        payload: {account_id: "${input.account_id}", order_id: "${input.order_id}", amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
        compensate:
          operation: payment.refund
          payload: {payment_id: "${steps.charge.target_object_id}", order_id: "${input.order_id}", amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
      - name: shipping
        operation: crm.task.create
        payload: {title: "Ship order ${input.order_id}", responsible_id: "${input.responsible_id}", customer_id: "${input.customer_id}"}
`

// TestProcessDeclarationLoads: the worked example loads from the file and
// compiles.
func TestProcessDeclarationLoads(t *testing.T) {
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, checkoutYAML)))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	reg, err := c.registry()
	require.NoError(t, err)
	set, err := c.processes(reg)
	require.NoError(t, err)
	def, ok := set.Lookup("order.checkout")
	require.True(t, ok)
	require.Len(t, def.Steps, 3)
	require.Equal(t, "payment.refund", def.Steps[1].Compensation.Operation)
}

// TestProcessDeclarationsExit78: a template naming an unknown field or
// step, a compensation whose type does not exist, a forward reference (the
// only cycle ordered steps can make) stop `idemgate run` at start with
// exit 78 and a message naming the key at fault.
func TestProcessDeclarationsExit78(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"unknown input field": {`"${input.customer_id}", amount_minor`, `"${input.customer}", amount_minor`,
			"processes.order.checkout.steps.invoice: ${input.customer} names input field customer, which the input does not declare"},
		"unknown step": {`"${steps.charge.target_object_id}"`, `"${steps.payment.target_object_id}"`,
			"${steps.payment.target_object_id} names step payment, which the process does not have"},
		"unknown compensation type": {"operation: invoice.cancel", "operation: invoice.annul",
			"processes.order.checkout.steps.invoice.compensate.operation: the compensation's operation type invoice.annul does not exist"},
		"forward reference": {`title: "Ship order ${input.order_id}"`, `title: "Ship order ${steps.shipping.target_object_id}"`,
			"a step cannot wait on itself (a cycle)"},
		"later step": {`reason: "checkout compensated"`, `reason: "${steps.shipping.target_object_id}"`,
			"names step shipping, which runs later"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			yaml := strings.Replace(checkoutYAML, tc.from, tc.to, 1)
			require.NotEqual(t, checkoutYAML, yaml)
			p := writeConfig(t, "data_dir: "+t.TempDir()+"\nadmin:\n  addr: \"\"\n"+yaml)
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			code := run(ctx, []string{"run", "--config", p}, &stdout, &stderr)
			require.Equal(t, exitConfig, code, "stderr: %s", stderr.String())
			require.Contains(t, stderr.String(), tc.want)
		})
	}
}
