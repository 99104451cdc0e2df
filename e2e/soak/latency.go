// Time from publish to final result, by the nemesis window active at
// publish time.

package main

import (
	"sort"
	"time"
)

// LatencyRow is the time from publish to final result in one kind of fault
// window.
type LatencyRow struct {
	Window string        `json:"window"`
	N      int           `json:"n"`
	P50    time.Duration `json:"p50_ns"`
	P99    time.Duration `json:"p99_ns"`
	Max    time.Duration `json:"max_ns"`
}

// latency measures, per message with a known final answer, the time from its
// first publish to the first final result for its key at or after it (the
// reply when one came, else the results stream), grouped by the nemesis
// window active at publish time.
func latency(h History) []LatencyRow {
	first := map[string][]time.Time{}
	for _, r := range h.Results {
		if r.Status != "pending" {
			first[r.Key] = append(first[r.Key], r.At)
		}
	}
	for k := range first {
		sort.Slice(first[k], func(i, j int) bool { return first[k][i].Before(first[k][j]) })
	}
	groups := map[string][]time.Duration{}
	for _, s := range h.Sent {
		var at time.Time
		if s.Reply != nil {
			at = s.Reply.At
		} else {
			for _, t := range first[s.Key] {
				if !t.Before(s.At) {
					at = t
					break
				}
			}
		}
		if at.IsZero() {
			continue
		}
		d := at.Sub(s.At)
		groups["all"] = append(groups["all"], d)
		active := false
		for _, w := range h.Windows {
			if !s.At.Before(w.Start) && !s.At.After(w.End) {
				groups[w.Kind] = append(groups[w.Kind], d)
				active = true
			}
		}
		if !active {
			groups["quiet"] = append(groups["quiet"], d)
		}
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "all") != (names[j] == "all") {
			return names[i] == "all"
		}
		return names[i] < names[j]
	})
	out := make([]LatencyRow, 0, len(names))
	for _, n := range names {
		ds := groups[n]
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		out = append(out, LatencyRow{Window: n, N: len(ds), P50: pct(ds, 0.50), P99: pct(ds, 0.99), Max: ds[len(ds)-1]})
	}
	return out
}

func pct(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds)-1) * p)
	return ds[i]
}
