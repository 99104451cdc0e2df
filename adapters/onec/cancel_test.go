package onec_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/operation"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
)

// cancelOp cancels the invoice "inv-<intent>"; variant 1 changes the reason.
func cancelOp(intent string, variant int) operation.Operation {
	return cancelOf(intent, "inv-"+intent, variant)
}

func cancelOf(intent, invoiceRef string, variant int) operation.Operation {
	reason := "order cancelled by the customer"
	if variant != 0 {
		reason = "charge declined"
	}
	return adaptertest.Op(onec.OpInvoiceCancel, intent, map[string]any{
		"invoice_id": invoiceRef, "order_id": "order-" + intent, "reason": reason,
	})
}

// seedInvoices makes the invoice each operation cancels exist in the base,
// except those named missing-…, which the tests want absent.
func seedInvoices(srv *sbonec.Server) func(operation.Operation) {
	return func(o operation.Operation) {
		if ref := o.String("invoice_id"); ref != "" && !strings.HasPrefix(ref, "missing-") {
			srv.SeedInvoice(ref, o.String("order_id"), 125000, "RUB")
		}
	}
}

func TestCancelContract(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			a, srv := setup(t, onec.ModeHTTPService)
			return adaptertest.Setup{Adapter: a, Sandbox: srv, Seed: seedInvoices(srv)}
		},
		Op: cancelOp,
		Invalid: func(intent string) operation.Operation {
			return cancelOf(intent, "missing-"+intent, 0) // 1C knows no such invoice (422)
		},
		Secret:          sbonec.DefaultPassword,
		ReplayDedup:     true,
		DetectsMismatch: true,
		// Behind a connector that drops the key, the second cancellation
		// of the same invoice is refused by the invoice itself (already
		// cancelled): one effect.
		IgnoreKeyEffects: 1,
		ConcurrentDedup:  true,
	})
}

// A cancellation is a document of its own: the invoice stays, marked
// cancelled, and another intent cannot cancel it again.
func TestCancelKeepsTheInvoiceAndRefusesASecondIntent(t *testing.T) {
	t.Parallel()
	a, srv := setup(t, onec.ModeHTTPService)
	inv, err := a.Execute(context.Background(), invoiceOp(adaptertest.Intent("inv"), "order-c1", 0))
	require.NoError(t, err)
	first := cancelOf(adaptertest.Intent("cancel"), inv.ObjectID, 0)
	out, err := a.Execute(context.Background(), first)
	require.NoError(t, err)
	require.Equal(t, "cancelled", out.BusinessStatus)
	require.Equal(t, inv.ObjectID, out.Details["invoice_id"])
	require.NotEqual(t, inv.ObjectID, out.ObjectID, "the cancelling document is its own object")
	by, ok := srv.Cancelled(inv.ObjectID)
	require.True(t, ok)
	require.Equal(t, out.ObjectID, by)
	require.Equal(t, 1, srv.Documents(), "the invoice is not deleted and no invoice is added")

	_, err = a.Execute(context.Background(), cancelOf(adaptertest.Intent("cancel-again"), inv.ObjectID, 0))
	adaptertest.RequireClass(t, err, adapters.NeverRetry, onec.CodeAlreadyCancelled)
	kinds := map[string]int{}
	for _, e := range srv.Ledger().Effects() {
		kinds[e.Kind]++
	}
	require.Equal(t, map[string]int{sbonec.EffectInvoice: 1, sbonec.EffectInvoiceCancel: 1}, kinds)
}

// invoice.cancel is the HTTP service's: an adapter in odata mode says so,
// and makes nothing.
func TestCancelNeedsTheHTTPService(t *testing.T) {
	t.Parallel()
	a, srv := setup(t, onec.ModeOData)
	require.NoError(t, a.Supports(onec.OpInvoiceCreate))
	require.ErrorIs(t, a.Supports(onec.OpInvoiceCancel), onec.ErrCancelNeedsService)
	require.Error(t, a.Supports(operation.TypeTaskCreate))
	_, err := a.Execute(context.Background(), cancelOp(adaptertest.Intent("odata"), 0))
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeValidation)
	require.Equal(t, 0, srv.TotalEffects())
	svc, _ := setup(t, onec.ModeHTTPService)
	require.NoError(t, svc.Supports(onec.OpInvoiceCancel))
}
