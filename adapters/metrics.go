package adapters

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the adapters' Prometheus metrics, shared by every adapter
// instance of a process (HTTPConfig.Metrics); the label is the instance
// name, never a key or a URL.
type Metrics struct {
	opened *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil:
// unregistered):
//
//   - idemgate_adapter_connections_opened_total{target}: TCP connections an
//     adapter's HTTP client opened. Under a steady load it stays flat: the
//     idle pool (HTTPConfig.MaxInFlight) keeps the connections for the next
//     calls.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		opened: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgate", Name: "adapter_connections_opened_total",
			Help: "TCP connections opened by the adapter's HTTP client toward its target."}, []string{"target"}),
	}
	if reg != nil {
		reg.MustRegister(m.opened)
	}
	return m
}
