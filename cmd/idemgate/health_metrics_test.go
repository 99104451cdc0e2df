package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
)

// TestHealthGaugesCountWaitingApprovals: the scrape-time gauges read the
// journal: no waiting intent gives 0 and 0; two waiting give 2 and the age
// of the older; a decided one is no longer counted.
func TestHealthGaugesCountWaitingApprovals(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	defer st.Close()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(healthCollector{store: st}))
	gauges := func() (pending, oldest float64) {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			switch mf.GetName() {
			case "idemgate_approvals_pending":
				pending = mf.GetMetric()[0].GetGauge().GetValue()
			case "idemgate_approvals_pending_oldest_age_seconds":
				oldest = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return pending, oldest
	}
	p, o := gauges()
	require.Zero(t, p)
	require.Zero(t, o)

	for _, k := range []string{"test:payment.charge:h-1:v1", "test:payment.charge:h-2:v1"} {
		_, _, err := st.RequestApproval(ctx, journal.ApprovalRequest{Key: k, OperationType: "payment.charge", RequestHash: "h-" + k,
			TargetSystem: "payments", Approvers: 1, TTL: time.Hour, Display: json.RawMessage(`{"operation":"payment.charge"}`)})
		require.NoError(t, err)
		time.Sleep(1100 * time.Millisecond) // the first waits longer than the second
	}
	p, o = gauges()
	require.Equal(t, 2.0, p)
	require.GreaterOrEqual(t, o, 2.0, "the older request's age")
	require.Less(t, o, 60.0)

	_, err = st.DecideApproval(ctx, journal.ApprovalDecision{Key: "test:payment.charge:h-1:v1", Vote: journal.VoteDeny, Approver: "alice", Reason: "not ordered"})
	require.NoError(t, err)
	p, o = gauges()
	require.Equal(t, 1.0, p)
	require.Less(t, o, 2.0, "the remaining request is the younger one")
}
