package worker

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// Metrics are the worker's Prometheus metrics. Labels stay low-cardinality:
// never an operation key, a customer or an amount.
type Metrics struct {
	// Approvals: commands answered awaiting approval, decisions by kind
	// (approved, denied, expired), and the wait from request to decision.
	awaitingApproval  prometheus.Counter
	approvalDecisions *prometheus.CounterVec
	approvalTokens    *prometheus.CounterVec
	approvalWait      prometheus.Histogram
	notifications     *prometheus.CounterVec
	fetched           prometheus.Counter
	executed          prometheus.Counter
	rejected          prometheus.Counter
	unrouted          prometheus.Counter
	unknown           prometheus.Counter
	failedFinal       prometheus.Counter
	retries           prometheus.Counter
	waited            prometheus.Counter
	waitsEnded        prometheus.Counter
	// heldFor reads the age of the oldest delivery this worker holds
	// (consumer.Router.OldestHeld), once the worker's router exists.
	heldFor       atomic.Pointer[func() time.Duration]
	decisions     *prometheus.CounterVec
	byDecision    map[journal.Decision]prometheus.Counter
	results       *prometheus.CounterVec
	reconciled    *prometheus.CounterVec
	duplicates    *prometheus.CounterVec
	fenced        *prometheus.CounterVec
	unresolved    *prometheus.GaugeVec
	latency       prometheus.Histogram
	calls         *prometheus.HistogramVec
	callsByClass  *prometheus.CounterVec
	batchSize     *prometheus.HistogramVec
	batchDuration *prometheus.HistogramVec
	pending       *prometheus.GaugeVec
	// For alerts: retry budgets spent, and results JetStream did not
	// acknowledge.
	exhausted    prometheus.Counter
	publishFails prometheus.Counter
	requeued     prometheus.Counter
	givenUp      prometheus.Counter
}

// Decisions are the six claim decisions, each counted under
// claim_decisions_total{decision}.
var Decisions = []journal.Decision{journal.Execute, journal.ReplaySucceeded, journal.ReplayFailed,
	journal.Conflict, journal.InProgress, journal.Reconcile}

// Lookup results, the values of reconcile_lookups_total{result}.
const (
	lookupFound         = "found"
	lookupNotFound      = "not_found"
	lookupIndeterminate = "indeterminate" // the target cannot tell yet
	lookupError         = "error"         // the lookup call failed
)

// Journal batch kinds, the values of journal_batch_*{op}.
const (
	batchClaim    = "claim"
	batchComplete = "complete"
)

// NewMetrics creates the metrics and registers them on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idemgate", Name: name, Help: help})
	}
	m := &Metrics{
		awaitingApproval: c("commands_awaiting_approval_total", "Command deliveries answered pending because their intent waits for a person's approval (its command parked)."),
		approvalDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "approval_decisions_total",
			Help: "Approval records decided, by state: approved, denied, expired (counted where the decision is carried out)."}, []string{"state"}),
		approvalTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "approval_tokens_total",
			Help: "Commands carrying a pre-signed approval token, by outcome: accepted (the approval recorded) or refused (the command rejected, nothing executed)."}, []string{"outcome"}),
		approvalWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "idemgate", Name: "approval_wait_seconds",
			Help: "From an intent's approval request to its decision (approved, denied or expired).", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "approval_notifications_total",
			Help: "Approval request notifications (approvals.notify) by outcome: delivered (2xx), retried (delivered again later), given_up (attempts exhausted)."}, []string{"outcome"}),
		fetched:     c("commands_fetched_total", "Command deliveries fetched from JetStream."),
		executed:    c("operations_executed_total", "Operations whose call to the target succeeded."),
		rejected:    c("commands_rejected_total", "Commands rejected as undecodable or invalid."),
		unrouted:    c("commands_unrouted_total", "Valid commands left in JetStream because no adapter serves their operation here."),
		unknown:     c("operations_unknown_total", "Calls whose outcome became unknown (reconcile before retry)."),
		failedFinal: c("operations_failed_final_total", "Operations that failed finally."),
		retries:     c("operation_retries_total", "Retry-class failures that led to another attempt or a redelivery."),
		waited:      c("commands_waited_total", "Copies of a command (claim in_progress) that waited in this worker for the delivery owning their key to settle, instead of a redelivery."),
		waitsEnded:  c("commands_wait_ended_total", "Copies whose wait for the delivery owning their key reached its bound (a call plus its lookup) before that delivery settled: claimed again, and sent back to JetStream if the key was still held."),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "claim_decisions_total",
			Help: "Journal claim decisions of command deliveries: execute, replay_succeeded, replay_failed, conflict, in_progress, reconcile."},
			[]string{"decision"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "results_published_total",
			Help: "Results published, by status."}, []string{"status"}),
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "reconcile_lookups_total",
			Help: "Lookups of unknown outcomes by key, by result: found, not_found, indeterminate (the target cannot tell yet), error (the lookup failed)."},
			[]string{"result"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "duplicates_detected_total",
			Help: "Operations whose target holds more than one object for the key, by adapter."}, []string{"target"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "completions_fenced_total",
			Help: "Completions refused for a stale fencing token (another owner took the operation over): fencing working as designed."},
			[]string{"by"}),
		unresolved: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "idemgate", Name: "operations_unresolved",
			Help: "Unresolved operations, by kind: unknown (an unknown outcome after reconciler.review_after lookups: a person checks the target) " +
				"and idle_retry (a retryable failure untouched for reconciler.idle_after: the agent must resend it)."}, []string{"kind"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "idemgate", Name: "command_duration_seconds",
			Help: "From fetch to ack/nak/term of a delivery.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idemgate", Name: "adapter_call_duration_seconds",
			Help: "Duration of calls to targets.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"operation"}),
		callsByClass: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "adapter_calls_total",
			Help: "Calls to targets, by adapter and by the class of their error: ok, retry, never_retry, reconcile_before_retry."},
			[]string{"adapter", "class"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idemgate", Name: "journal_batch_size",
			Help:    "Operations per journal round trip: a fetch's claim, a group commit's completions.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11)}, []string{"op"}),
		batchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idemgate", Name: "journal_batch_duration_seconds",
			Help:    "Duration of one batched journal round trip: a fetch's claim, a group commit's completions.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)}, []string{"op"}),
		exhausted: c("operations_retries_exhausted_total",
			"Intents whose retry budget ran out on retry-class answers (failed_final, or looked up first after an unknown outcome)."),
		publishFails: c("results_publish_failed_total",
			"Results JetStream did not acknowledge (PubAck error or timeout): the command is redelivered and the result replayed."),
		requeued: c("commands_requeued_total",
			"Commands requeued on their last delivery (nats.max_deliver) with no final result yet: a copy is stored, then the original terminated."),
		givenUp: c("commands_given_up_total",
			"Commands given up with no result: older than nats.commands_max_age on their last delivery, or their requeue failed (logged with the stream sequence)."),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "idemgate", Name: "jetstream_pending",
			Help: "Commands of the durable consumer (all replicas), read from its info every heartbeat_interval: " +
				"undelivered (not yet delivered) and ack_pending (delivered, not yet acknowledged)."}, []string{"state"}),
	}
	m.byDecision = make(map[journal.Decision]prometheus.Counter, len(Decisions))
	for _, d := range Decisions {
		m.byDecision[d] = m.decisions.WithLabelValues(string(d))
	}
	for _, r := range []string{lookupFound, lookupNotFound, lookupIndeterminate, lookupError} {
		m.reconciled.WithLabelValues(r)
	}
	for _, op := range []string{batchClaim, batchComplete} {
		m.batchSize.WithLabelValues(op)
		m.batchDuration.WithLabelValues(op)
	}
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "idemgate", Name: "delivery_oldest_held_seconds",
		Help: "Age of the oldest command delivery this replica holds (fetched, not yet acked, naked or terminated): " +
			"at most retry.in_lease plus three call_timeouts (a bounded wait for another call and its lookup, then a call run and a lookup of its own)."},
		func() float64 {
			if f := m.heldFor.Load(); f != nil {
				return (*f)().Seconds()
			}
			return 0
		})
	for _, k := range answer.Kinds() {
		m.unresolved.WithLabelValues(string(k))
	}
	// Every series is there from the start: a dashboard's rate() and an
	// alert see 0, not nothing, before the first decision.
	for _, st := range []journal.ApprovalState{journal.ApprovalApproved, journal.ApprovalDenied, journal.ApprovalExpired} {
		m.approvalDecisions.WithLabelValues(string(st))
	}
	for _, o := range []string{tokenAccepted, tokenRefused} {
		m.approvalTokens.WithLabelValues(o)
	}
	for _, o := range []string{notifyDelivered, notifyRetried, notifyGivenUp} {
		m.notifications.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(held, m.waitsEnded, m.fetched, m.executed, m.rejected, m.unrouted, m.unknown, m.failedFinal,
			m.retries, m.waited, m.decisions, m.results, m.reconciled, m.duplicates, m.fenced, m.unresolved, m.latency, m.calls,
			m.callsByClass, m.batchSize, m.batchDuration, m.pending, m.exhausted, m.publishFails, m.requeued, m.givenUp,
			m.awaitingApproval, m.approvalDecisions, m.approvalTokens, m.approvalWait, m.notifications)
	}
	return m
}

// decided counts a claim decision.
func (m *Metrics) decided(d journal.Decision) {
	if c, ok := m.byDecision[d]; ok {
		c.Inc()
		return
	}
	m.decisions.WithLabelValues(string(d)).Inc()
}

// DecisionCounts are the claim decisions this process counted since it
// started (claim_decisions_total), by decision: what the operator console
// shows of replays and conflicts, which leave no row in the journal.
func (m *Metrics) DecisionCounts() map[journal.Decision]float64 {
	out := make(map[journal.Decision]float64, len(m.byDecision))
	for d, c := range m.byDecision {
		var pb dto.Metric
		if c.Write(&pb) == nil {
			out[d] = pb.GetCounter().GetValue()
		}
	}
	return out
}

// called counts a call to a target by its adapter and the class of its
// error ("ok" without one).
func (m *Metrics) called(adapter string, class adapters.Class, err error) {
	label := "ok"
	if err != nil {
		label = string(class)
	}
	m.callsByClass.WithLabelValues(adapter, label).Inc()
}

// batch records one batched journal round trip.
func (m *Metrics) batch(op string, n int, took time.Duration) {
	m.batchSize.WithLabelValues(op).Observe(float64(n))
	m.batchDuration.WithLabelValues(op).Observe(took.Seconds())
}

// routerHooks counts what the consumer's router does.
func (m *Metrics) routerHooks() consumer.Hooks {
	undelivered, ackPending := m.pending.WithLabelValues("undelivered"), m.pending.WithLabelValues("ack_pending")
	return consumer.Hooks{
		Fetched:       func(n int) { m.fetched.Add(float64(n)) },
		Settled:       func(d time.Duration) { m.latency.Observe(d.Seconds()) },
		SettledTraced: func(d time.Duration, traceID string) { observeTraced(m.latency, d, traceID) },
		Published:     func(s operation.ResultStatus) { m.results.WithLabelValues(string(s)).Inc() },
		PublishFailed: func() { m.publishFails.Inc() },
		Requeued:      func() { m.requeued.Inc() },
		GivenUp:       func() { m.givenUp.Inc() },
		Pending: func(u, a uint64) {
			undelivered.Set(float64(u))
			ackPending.Set(float64(a))
		},
	}
}
