package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgate/idemgate/journal"
)

// healthCollector exports, at scrape time, what alerts need and no event
// counts: the age of the oldest unknown operation, from the journal. Each
// replica reports the same shared value; alerts take their max.
type healthCollector struct {
	store journal.Store
}

// healthScrapeTimeout bounds the look-up of a scrape: a journal that does
// not answer leaves the gauge out, it does not hang the scrape.
const healthScrapeTimeout = 2 * time.Second

var (
	descOldestUnknown = prometheus.NewDesc("idemgate_operations_unknown_oldest_age_seconds",
		"Age of the oldest operation whose outcome is unknown (0 when none): how long the longest reconciliation has been going on, counted from the operation's creation.", nil, nil)
)

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOldestUnknown
}

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), healthScrapeTimeout)
	defer cancel()
	if c.store != nil {
		if list, err := c.store.ListUnresolved(ctx, 0, 1); err == nil {
			age := 0.0
			if len(list) > 0 {
				if now, err := c.store.Now(ctx); err == nil {
					age = max(0, now.Sub(list[0].CreatedAt).Seconds())
				}
			}
			ch <- prometheus.MustNewConstMetric(descOldestUnknown, prometheus.GaugeValue, age)
		}
	}
}

// registerHealthMetrics registers the scrape-time gauges. A name another
// part of the daemon already exports is left to that part.
func registerHealthMetrics(reg prometheus.Registerer, store journal.Store, log *slog.Logger) {
	if err := reg.Register(healthCollector{store: store}); err != nil {
		log.Warn("scrape-time health gauges not registered", "error", err.Error())
	}
}
