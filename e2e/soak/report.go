package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// writeReports writes soak-report.json and soak-report.md into dir, and
// breached.txt (one breached invariant a line) for scripts.
func writeReports(dir string, rep Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak-report.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak-report.md"), []byte(markdown(rep)), 0o644); err != nil {
		return err
	}
	var br strings.Builder
	for _, n := range rep.Breached {
		br.WriteString(n + "\n")
	}
	return os.WriteFile(filepath.Join(dir, "breached.txt"), []byte(br.String()), 0o644)
}

func verdict(rep Report) string {
	if rep.Pass {
		return "PASS"
	}
	return "FAIL"
}

// summary is the few lines printed at the end of a run.
func summary(rep Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %s — %d commands, %d intents, %d effects, %d results\n", verdict(rep),
		rep.Counts.Commands, rep.Counts.Intents, rep.Counts.Effects, rep.Counts.Results)
	if rep.Counts.Processes > 0 {
		fmt.Fprintf(&b, "  %d processes: %s\n", rep.Counts.Processes, kv(rep.Counts.ProcessFinal))
	}
	for _, iv := range rep.Invariants {
		fmt.Fprintf(&b, "  %s %-28s %d\n", iv.label("ok  ", "FAIL", "KNWN"), iv.Name, iv.Count)
		if iv.Breached {
			for _, e := range iv.Examples[:min(3, len(iv.Examples))] {
				fmt.Fprintf(&b, "         %s\n", e)
			}
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// label is ok, breached or known, as the invariant held, was breached, or
// was breached by a known defect (--known).
func (iv Invariant) label(ok, breached, known string) string {
	switch {
	case !iv.Breached:
		return ok
	case iv.Known:
		return known
	}
	return breached
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func markdown(rep Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# idemgate fault soak: %s\n\n", verdict(rep))
	if r := rep.Run; r != nil {
		fmt.Fprintf(&b, "| run | |\n|---|---|\n")
		fmt.Fprintf(&b, "| seed | %d |\n| workload | %.0f commands/s for %s |\n| replicas | %d (%s) |\n", r.Seed, r.Rate, r.Duration, r.Replicas, strings.Join(r.Restarts, ", "))
		fmt.Fprintf(&b, "| nemesis | %s |\n| horizons | %s |\n", strings.Join(r.Nemesis, ", "), r.Horizons)
		if r.Break != "" {
			fmt.Fprintf(&b, "| broken on purpose | %s |\n", r.Break)
		}
		if r.Held != "" {
			fmt.Fprintf(&b, "| longest delivery held | %s |\n", r.Held)
		}
		fmt.Fprintf(&b, "| settled | %v in %s |\n| unexpected replica exits | %d |\n| publish retries (broker down) | %d |\n| elapsed | %s |\n| output | %s |\n\n",
			r.SettleOK, r.Settled, r.Unexpected, r.PubRetries, r.Elapsed, r.Out)
	}
	c := rep.Counts
	fmt.Fprintf(&b, "## History\n\n%d commands (%s) over %d intents (%s); %d effects in the targets; %d results in the stream; %d replies; %d attempts in the trail; final status by key: %s.\n\n",
		c.Commands, kv(c.ByKind), c.Intents, kv(c.ByOp), c.Effects, c.Results, c.Replies, c.Attempts, kv(c.Final))
	if c.Processes > 0 {
		fmt.Fprintf(&b, "%d processes (checkouts; their steps and compensations are among the intents above), by state: %s.\n\n", c.Processes, kv(c.ProcessFinal))
	}
	fmt.Fprintf(&b, "## Invariants\n\n| invariant | checks | count | verdict |\n|---|---|---:|---|\n")
	for _, iv := range rep.Invariants {
		fmt.Fprintf(&b, "| `%s` | %s | %d | %s |\n", iv.Name, iv.Says, iv.Count, iv.label("ok", "**BREACHED**", "breached (known defect)"))
	}
	for _, iv := range rep.Invariants {
		if !iv.Breached {
			continue
		}
		fmt.Fprintf(&b, "\n### `%s`: first offending keys\n\n", iv.Name)
		for _, e := range iv.Examples {
			fmt.Fprintf(&b, "- `%s`\n", e)
		}
	}
	fmt.Fprintf(&b, "\n## Time from publish to final result, by fault window\n\n| window | commands | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n")
	for _, l := range rep.Latency {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", l.Window, l.N, ms(l.P50), ms(l.P99), ms(l.Max))
	}
	fmt.Fprintf(&b, "\n## Timeline\n\n| start | length | nemesis | detail |\n|---|---:|---|---|\n")
	ws := append([]Window(nil), rep.Windows...)
	sort.Slice(ws, func(i, j int) bool { return ws[i].Start.Before(ws[j].Start) })
	var t0 time.Time
	if len(ws) > 0 {
		t0 = ws[0].Start
	}
	for _, w := range ws {
		fmt.Fprintf(&b, "| +%s | %s | %s | %s |\n", w.Start.Sub(t0).Round(100*time.Millisecond), w.End.Sub(w.Start).Round(100*time.Millisecond),
			w.Kind, strings.TrimSpace(w.Detail+" "+w.Note))
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintf(&b, "\n## Notes\n\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

func kv(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
