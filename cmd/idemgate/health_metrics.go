package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgate/idemgate/journal"
)

// healthCollector exports, at scrape time, what alerts need and no event
// counts: the age of the oldest unknown operation, and how many intents
// wait for a person's approval and since when, from the journal. Each
// replica reports the same shared values; alerts take their max.
type healthCollector struct {
	store journal.Store
}

// healthScrapeTimeout bounds the look-up of a scrape: a journal that does
// not answer leaves the gauge out, it does not hang the scrape.
const healthScrapeTimeout = 2 * time.Second

var (
	descOldestUnknown = prometheus.NewDesc("idemgate_operations_unknown_oldest_age_seconds",
		"Age of the oldest operation whose outcome is unknown (0 when none): how long the longest reconciliation has been going on, counted from the operation's creation.", nil, nil)
	descApprovalsPending = prometheus.NewDesc("idemgate_approvals_pending",
		fmt.Sprintf("Intents waiting for a person's approval (awaiting_approval), counted up to %d.", approvalsCountedUpTo), nil, nil)
	descApprovalsOldest = prometheus.NewDesc("idemgate_approvals_pending_oldest_age_seconds",
		"How long the longest-waiting intent has waited for a person's approval (0 when none).", nil, nil)
)

// approvalsCountedUpTo bounds the rows a scrape reads to count the pending
// approvals: beyond it the gauge says this many plus one.
const approvalsCountedUpTo = 1000

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOldestUnknown
	ch <- descApprovalsPending
	ch <- descApprovalsOldest
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
		if pending, err := c.store.PendingApprovals(ctx, approvalsCountedUpTo+1); err == nil {
			age := 0.0
			if len(pending) > 0 {
				if now, err := c.store.Now(ctx); err == nil {
					age = max(0, now.Sub(pending[0].RequestedAt).Seconds())
				}
			}
			ch <- prometheus.MustNewConstMetric(descApprovalsPending, prometheus.GaugeValue, float64(len(pending)))
			ch <- prometheus.MustNewConstMetric(descApprovalsOldest, prometheus.GaugeValue, age)
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
