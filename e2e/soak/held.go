// How long each replica holds a command delivery: sampled every second from
// its idemgate_delivery_oldest_held_seconds (the oldest delivery it has
// fetched and not yet settled), for the held_too_long invariant.

package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// heldMetric is the gauge each replica exports.
const heldMetric = "idemgate_delivery_oldest_held_seconds"

// heldBound is the longest a replica may hold a delivery in this soak's
// configuration: retry.in_lease (the daemon's default, 10 s) plus three
// call_timeouts (4 s: a copy's bounded wait for another call and its
// lookup, then a call run and a lookup of its own), plus the longest
// outage the nemesis causes (a paused replica stands still past its lease;
// PostgreSQL stays down), and two heartbeats of slack for a loaded
// machine's journal and broker round trips.
func (s *soak) heldBound() time.Duration {
	const inLease, call, heartbeat = 10 * time.Second, 4 * time.Second, 2 * time.Second
	var outage time.Duration
	if s.nem.kinds[NemPause] {
		outage = max(outage, s.cfg.lease+4*time.Second)
	}
	if s.nem.kinds[NemPG] {
		outage = max(outage, s.cfg.pgDown)
	}
	return inLease + 3*call + outage + 2*heartbeat
}

// heldWatch keeps, per replica, the longest hold seen.
type heldWatch struct {
	mu  sync.Mutex
	max map[string]float64
}

// watchHeld samples every replica's oldest held delivery each second until
// ctx ends.
func (s *soak) watchHeld(ctx context.Context, hw *heldWatch) {
	client := &http.Client{Timeout: 2 * time.Second}
	every(ctx, time.Second, func() {
		for i, a := range s.adminAddr {
			v, ok := scrapeGauge(ctx, client, "http://"+a+"/metrics", heldMetric)
			if !ok {
				continue // down (a nemesis), or between restarts
			}
			name := s.replicas[i].Name
			hw.mu.Lock()
			if v > hw.max[name] {
				hw.max[name] = v
			}
			hw.mu.Unlock()
		}
	})
}

func (hw *heldWatch) snapshot() map[string]float64 {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	out := make(map[string]float64, len(hw.max))
	for k, v := range hw.max {
		out[k] = v
	}
	return out
}

// scrapeGauge reads one unlabelled gauge from a Prometheus text page.
func scrapeGauge(ctx context.Context, client *http.Client, url, name string) (float64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// heldText is the report's line: each replica's longest hold, and the bound.
func heldText(held map[string]float64, bound float64) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(held)) {
		parts = append(parts, fmt.Sprintf("%s %.1f s", name, held[name]))
	}
	return fmt.Sprintf("%s (bound %.0f s)", strings.Join(parts, ", "), bound)
}
