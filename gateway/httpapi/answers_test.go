package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/operation"
)

// TestHTTPConflictCarriesTheFirstOutcome: a 409 for a changed amount says
// the first request succeeded and names its payment, in the answer and in
// the problem's detail, and words a changed charge as a separate payment a
// person approves.
func TestHTTPConflictCarriesTheFirstOutcome(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{})
	first := post(t, b, "payment.charge", `"http-conflict"`, chargeBody("order-1", 125000), "Idempotency-Approval", "appr-1")
	require.Equal(t, http.StatusOK, first.code, "%+v", first)
	changed := post(t, b, "payment.charge", `"http-conflict"`, chargeBody("order-1", 500000), "Idempotency-Approval", "appr-1")
	require.Equal(t, http.StatusConflict, changed.code, "%+v", changed)
	require.Equal(t, &operation.Existing{Status: operation.ResultSucceeded, TargetObjectID: first.answer.TargetObjectID}, changed.answer.Existing)
	require.Contains(t, changed.problem["detail"], "The first request succeeded: the payment provider holds object "+first.answer.TargetObjectID)
	require.Contains(t, changed.problem["detail"], "approved by a person on its own")
	require.Equal(t, 1, b.d.YooKassa.TotalEffects())
}
