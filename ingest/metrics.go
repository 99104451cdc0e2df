package ingest

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Reason is why a webhook was not accepted: the reason label of
// idemgate_webhook_rejected_total.
type Reason string

// Reasons, with the HTTP status the sender gets.
const (
	ReasonUnknownSource      Reason = "unknown_source"      // 404
	ReasonAddress            Reason = "address"             // 403: sender not in the allow-list
	ReasonContentType        Reason = "content_type"        // 415
	ReasonTooLarge           Reason = "too_large"           // 413
	ReasonMalformed          Reason = "malformed"           // 400
	ReasonSignature          Reason = "signature"           // 401: missing, malformed or wrong
	ReasonTimestamp          Reason = "timestamp"           // 401: signed timestamp outside the tolerance
	ReasonNotTrusted         Reason = "not_trusted"         // 401 (object unknown) or 409 (state differs) after a re-fetch
	ReasonMapping            Reason = "mapping"             // 422: the route's payload could not be built
	ReasonRefetchUnavailable Reason = "refetch_unavailable" // 503: the provider could not be asked
	ReasonPublishUnavailable Reason = "publish_unavailable" // 503: JetStream did not acknowledge
)

// Reasons lists every Reason.
var Reasons = []Reason{
	ReasonUnknownSource, ReasonAddress, ReasonContentType, ReasonTooLarge, ReasonMalformed,
	ReasonSignature, ReasonTimestamp, ReasonNotTrusted, ReasonMapping,
	ReasonRefetchUnavailable, ReasonPublishUnavailable,
}

// unknownSourceLabel is the source label of requests for unconfigured
// sources (the path segment is the sender's and is not used as a label).
const unknownSourceLabel = "_unknown"

// counters are one source's counts.
type counters struct {
	accepted, duplicate, unrouted atomic.Uint64
	rejected                      [numReasons]atomic.Uint64
}

const numReasons = 11

// reasonIndex maps a Reason to its slot in counters.rejected.
var reasonIndex = func() map[Reason]int {
	if len(Reasons) != numReasons {
		panic("ingest: numReasons does not match Reasons") // a programming error, caught by any test
	}
	m := make(map[Reason]int, numReasons)
	for i, r := range Reasons {
		m[r] = i
	}
	return m
}()

func (c *counters) reject(r Reason) { c.rejected[reasonIndex[r]].Add(1) }

// Stats are counts of webhooks since the server was made.
type Stats struct {
	// Accepted were published and acknowledged by JetStream as new.
	Accepted uint64
	// Duplicate were acknowledged by JetStream as duplicates of a message in
	// its dedup window: a redelivery, answered 200 with no second command.
	Duplicate uint64
	// Unrouted were authentic but had no route: answered 200, not published.
	Unrouted uint64
	// Rejected were answered with an error status, by reason (zero counts
	// left out).
	Rejected map[Reason]uint64
}

func (c *counters) add(s *Stats) {
	s.Accepted += c.accepted.Load()
	s.Duplicate += c.duplicate.Load()
	s.Unrouted += c.unrouted.Load()
	for _, r := range Reasons {
		if n := c.rejected[reasonIndex[r]].Load(); n > 0 {
			if s.Rejected == nil {
				s.Rejected = map[Reason]uint64{}
			}
			s.Rejected[r] += n
		}
	}
}

// collector exports the counters to Prometheus.
type collector struct{ s *Server }

var (
	descAccepted = prometheus.NewDesc("idemgate_webhook_accepted_total",
		"Webhooks published to JetStream and acknowledged as new.", []string{"source"}, nil)
	descDuplicate = prometheus.NewDesc("idemgate_webhook_duplicates_total",
		"Webhooks acknowledged by JetStream as duplicates (redeliveries); no second command.", []string{"source"}, nil)
	descUnrouted = prometheus.NewDesc("idemgate_webhook_unrouted_total",
		"Authentic webhooks with no route; acknowledged, not published.", []string{"source"}, nil)
	descRejected = prometheus.NewDesc("idemgate_webhook_rejected_total",
		"Webhooks answered with an error status, by reason.", []string{"source", "reason"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAccepted
	ch <- descDuplicate
	ch <- descUnrouted
	ch <- descRejected
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for name, cs := range c.s.counters {
		ch <- prometheus.MustNewConstMetric(descAccepted, prometheus.CounterValue, float64(cs.accepted.Load()), name)
		ch <- prometheus.MustNewConstMetric(descDuplicate, prometheus.CounterValue, float64(cs.duplicate.Load()), name)
		ch <- prometheus.MustNewConstMetric(descUnrouted, prometheus.CounterValue, float64(cs.unrouted.Load()), name)
		for _, r := range Reasons {
			ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue,
				float64(cs.rejected[reasonIndex[r]].Load()), name, string(r))
		}
	}
}
