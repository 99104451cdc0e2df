package worker_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/worker"
)

// series reads one series of a registered metric (0 when it has no sample
// yet): a counter's or gauge's value, a histogram's sample count.
func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// TestMetricsAfterRealTraffic drives every claim decision, each lookup
// result and several error classes through a worker, and reads each metric
// back from the registry.
func TestMetricsAfterRealTraffic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	b.metrics = worker.NewMetrics(reg)
	b.worker(t, "w1", worker.Config{HeartbeatInterval: 100 * time.Millisecond})
	decisions := func(d string) float64 {
		return series(t, reg, "idemgate_claim_decisions_total", map[string]string{"decision": d})
	}
	calls := func(class string) float64 {
		return series(t, reg, "idemgate_adapter_calls_total", map[string]string{"adapter": "testtarget", "class": class})
	}
	lookups := func(result string) float64 {
		return series(t, reg, "idemgate_reconcile_lookups_total", map[string]string{"result": result})
	}

	// execute, then replay_succeeded, then conflict.
	const key = "test:payment.charge:evt-m:v1"
	b.publish(t, charge("evt-m", "order-1", 100))
	require.Equal(t, operation.ResultSucceeded, b.await(t, key, 1)[0].Status)
	b.publish(t, charge("evt-m", "order-1", 100))
	require.True(t, b.await(t, key, 1)[0].Replayed)
	b.publish(t, charge("evt-m", "order-1", 999))
	require.Equal(t, operation.ResultConflict, b.await(t, key, 1)[0].Status)

	// never_retry: failed_final, then replay_failed.
	b.target.mu.Lock()
	b.target.faults = append(b.target.faults, func(operation.Operation) error {
		return adapters.NewError(adapters.CodeValidation, adapters.NeverRetry, nil)
	})
	b.target.mu.Unlock()
	const failed = "test:payment.charge:evt-f:v1"
	b.publish(t, charge("evt-f", "order-2", 100))
	require.Equal(t, operation.ResultFailedFinal, b.await(t, failed, 1)[0].Status)
	b.publish(t, charge("evt-f", "order-2", 100))
	require.Equal(t, operation.ResultFailedFinal, b.await(t, failed, 1)[0].Status)

	// A lost answer: unknown, a lookup that fails, then one that finds it.
	b.target.mu.Lock()
	b.target.lostNext = 1
	b.target.lookupErr = append(b.target.lookupErr, adapters.NewError(adapters.CodeHTTP503, adapters.Retry, nil))
	b.target.mu.Unlock()
	const lost = "test:payment.charge:evt-l:v1"
	b.publish(t, charge("evt-l", "order-3", 100))
	require.Equal(t, operation.ResultSucceeded, b.await(t, lost, 1)[0].Status)

	// A copy arriving while the first still runs: in_progress. The held
	// delivery shows in the consumer's pending counts.
	block := make(chan struct{})
	b.target.mu.Lock()
	b.target.block = block
	b.target.mu.Unlock()
	const held = "test:payment.charge:evt-i:v1"
	b.publish(t, charge("evt-i", "order-4", 100))
	require.Eventually(t, func() bool { _, c := b.target.count(held); return c == 1 }, 30*time.Second, 10*time.Millisecond)
	b.publish(t, charge("evt-i", "order-4", 100))
	require.Eventually(t, func() bool { return decisions("in_progress") >= 1 }, 30*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		return series(t, reg, "idemgate_jetstream_pending", map[string]string{"state": "ack_pending"}) >= 1
	}, 30*time.Second, 20*time.Millisecond, "the held command is delivered and not yet acknowledged")
	b.target.mu.Lock()
	b.target.block = nil
	b.target.mu.Unlock()
	close(block)
	b.await(t, held, 2)
	require.Equal(t, 1.0, series(t, reg, "idemgate_commands_waited_total", nil), "the copy waited for the call")

	for _, d := range worker.Decisions {
		require.GreaterOrEqual(t, decisions(string(d)), 1.0, "claim_decisions_total{decision=%q}", d)
	}
	require.GreaterOrEqual(t, decisions("execute"), 4.0)
	require.Zero(t, series(t, reg, "idemgate_operations_replayed_total", nil), "replaced by claim_decisions_total")

	require.Equal(t, 1.0, lookups("error"), "the failed lookup")
	require.Equal(t, 1.0, lookups("found"))
	require.Zero(t, lookups("not_found"))

	require.GreaterOrEqual(t, calls("ok"), 2.0)
	require.Equal(t, 1.0, calls("never_retry"))
	require.Equal(t, 1.0, calls("reconcile_before_retry"), "the lost answer")

	for _, op := range []string{"claim", "complete"} {
		require.GreaterOrEqual(t, series(t, reg, "idemgate_journal_batch_size", map[string]string{"op": op}), 4.0, "journal_batch_size{op=%q}", op)
		require.GreaterOrEqual(t, series(t, reg, "idemgate_journal_batch_duration_seconds", map[string]string{"op": op}), 4.0,
			"journal_batch_duration_seconds{op=%q}", op)
	}
	require.Eventually(t, func() bool {
		return series(t, reg, "idemgate_jetstream_pending", map[string]string{"state": "ack_pending"}) == 0 &&
			series(t, reg, "idemgate_jetstream_pending", map[string]string{"state": "undelivered"}) == 0
	}, 30*time.Second, 20*time.Millisecond, "everything acknowledged")
}
