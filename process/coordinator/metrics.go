package coordinator

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the coordinator's Prometheus metrics. Labels are the
// declared process and step names and a closed set of outcomes: never a
// key, a customer or an amount.
type Metrics struct {
	// processes counts processes brought to rest by this coordinator, by
	// process and status (succeeded, compensated, needs_review).
	processes *prometheus.CounterVec
	// steps counts steps and compensations settled for a running process,
	// by process, step, kind (step, compensation) and outcome (succeeded,
	// failed, conflict).
	steps *prometheus.CounterVec
	// held is how many process commands this coordinator holds.
	held prometheus.Gauge
	// comeBacks counts process commands sent back to wait for a step.
	comeBacks prometheus.Counter
}

// NewMetrics registers the coordinator's metrics on reg (nil: not
// registered, still counted).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		processes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "processes_total",
			Help: "Business processes brought to rest, by process and status: succeeded, compensated, needs_review (a person must look)."},
			[]string{"process", "status"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "process_steps_total",
			Help: "Process steps and compensations settled, by process, step, kind (step, compensation) and outcome (succeeded, failed, conflict)."},
			[]string{"process", "step", "kind", "outcome"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idemgate", Name: "process_commands_held",
			Help: "Process commands this coordinator holds while their processes run."}),
		comeBacks: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idemgate", Name: "process_waits_total",
			Help: "Process commands sent back to JetStream to wait for a step not settled within coordinator.step_wait."}),
	}
	if reg != nil {
		reg.MustRegister(m.processes, m.steps, m.held, m.comeBacks)
	}
	return m
}

var outcomeNames = map[outcomeKind]string{succeeded: "succeeded", failed: "failed", conflict: "conflict"}
