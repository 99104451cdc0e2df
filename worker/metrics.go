package worker

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the worker's Prometheus metrics. Labels stay low-cardinality:
// never an operation key, a customer or an amount.
type Metrics struct {
	fetched       prometheus.Counter
	executed      prometheus.Counter
	replayed      prometheus.Counter
	conflicts     prometheus.Counter
	rejected      prometheus.Counter
	unrouted      prometheus.Counter
	unknown       prometheus.Counter
	failedFinal   prometheus.Counter
	retries       prometheus.Counter
	decisions     *prometheus.CounterVec
	results       *prometheus.CounterVec
	reconciled    *prometheus.CounterVec
	duplicates    *prometheus.CounterVec
	fenced        *prometheus.CounterVec
	unresolved    prometheus.Gauge
	idleRetryable prometheus.Gauge
	latency       prometheus.Histogram
	calls         *prometheus.HistogramVec
	// For alerts: retry budgets spent, and results JetStream did not
	// acknowledge.
	exhausted    prometheus.Counter
	publishFails prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idemgate", Name: name, Help: help})
	}
	m := &Metrics{
		fetched:     c("commands_fetched_total", "Command deliveries fetched from JetStream."),
		executed:    c("operations_executed_total", "Operations whose call to the target succeeded."),
		replayed:    c("operations_replayed_total", "Deliveries answered from the journal without a call."),
		conflicts:   c("operations_conflict_total", "Deliveries whose key was first used with another payload."),
		rejected:    c("commands_rejected_total", "Commands rejected as undecodable or invalid."),
		unrouted:    c("commands_unrouted_total", "Valid commands left in JetStream because no adapter serves their operation here."),
		unknown:     c("operations_unknown_total", "Calls whose outcome became unknown (reconcile before retry)."),
		failedFinal: c("operations_failed_final_total", "Operations that failed finally."),
		retries:     c("operation_retries_total", "Retry-class failures that led to another attempt or a redelivery."),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "claim_decisions_total",
			Help: "Journal claim decisions that led to work or waiting."}, []string{"decision"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "results_published_total",
			Help: "Results published, by status."}, []string{"status"}),
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "reconcile_lookups_total",
			Help: "Lookups of unknown outcomes, by what they found."}, []string{"found"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "duplicates_detected_total",
			Help: "Operations whose target holds more than one object for the key, by adapter."}, []string{"target"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "completions_fenced_total",
			Help: "Completions refused for a stale fencing token (another owner took the operation over): fencing working as designed."},
			[]string{"by"}),
		unresolved: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idemgate", Name: "operations_unresolved",
			Help: "Unknown operations raised for review after too many unsettled reconcile rounds."}),
		idleRetryable: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idemgate", Name: "operations_retry_idle",
			Help: "Retryable failures no delivery has retried for reconciler.idle_after: the agent must resend them."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "idemgate", Name: "command_duration_seconds",
			Help: "From fetch to ack/nak/term of a delivery.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idemgate", Name: "adapter_call_duration_seconds",
			Help: "Duration of calls to targets.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"operation"}),
		exhausted: c("operations_retries_exhausted_total",
			"Intents whose retry budget ran out on retry-class answers (failed_final, or looked up first after an unknown outcome)."),
		publishFails: c("results_publish_failed_total",
			"Results JetStream did not acknowledge (PubAck error or timeout): the command is redelivered and the result replayed."),
	}
	if reg != nil {
		reg.MustRegister(m.fetched, m.executed, m.replayed, m.conflicts, m.rejected, m.unrouted, m.unknown, m.failedFinal,
			m.retries, m.decisions, m.results, m.reconciled, m.duplicates, m.fenced, m.unresolved, m.idleRetryable, m.latency, m.calls,
			m.exhausted, m.publishFails)
	}
	return m
}
