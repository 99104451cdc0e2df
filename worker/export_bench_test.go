package worker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ObserveDurations makes m hand every delivery's fetch-to-done duration (the
// samples of command_duration_seconds) to f as well, for benchmarks that need
// exact percentiles rather than histogram buckets. Call it before New.
func ObserveDurations(m *Metrics, f func(time.Duration)) {
	m.latency = observedHistogram{Histogram: m.latency, f: f}
}

type observedHistogram struct {
	prometheus.Histogram
	f func(time.Duration)
}

func (h observedHistogram) ObserveWithExemplar(seconds float64, exemplar prometheus.Labels) {
	h.Histogram.(prometheus.ExemplarObserver).ObserveWithExemplar(seconds, exemplar)
	h.f(time.Duration(seconds * float64(time.Second)))
}

func (h observedHistogram) Observe(seconds float64) {
	h.Histogram.Observe(seconds)
	h.f(time.Duration(seconds * float64(time.Second)))
}
