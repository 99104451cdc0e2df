package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/ctxsleep"
)

// Nemesis kinds (each switchable with --nemesis).
const (
	NemKill   = "kill"   // SIGKILL a replica at random, restart it
	NemCrash  = "crash"  // restart a replica told to SIGKILL itself at a named crash point
	NemPause  = "pause"  // SIGSTOP a replica past its lease, then SIGCONT
	NemPG     = "pg"     // stop PostgreSQL (immediate), start it again
	NemNATS   = "nats"   // kill -9 nats-server, restart it on its store
	NemFaults = "faults" // sandbox faults: lost responses, resets, delays, 429/503 storms, a key-dropping connector
)

var allNemeses = []string{NemKill, NemCrash, NemPause, NemPG, NemNATS, NemFaults}

// faultSet is one window of sandbox faults: rules per emulator.
type faultSet struct {
	name  string
	rules map[string][]map[string]any
}

// faultSets are the target-side windows, in order. The key-dropping
// connector is put only in front of Bitrix24, a target that looks up
// before it creates; in front of a native-key-only target it would show the
// documented residual window, not a defect.
func faultSets(knownDefects bool) []faultSet {
	native := []string{"onec", "yookassa"}
	all := []string{"onec", "yookassa", "bitrix24"}
	each := func(targets []string, rules ...map[string]any) map[string][]map[string]any {
		m := map[string][]map[string]any{}
		for _, t := range targets {
			m[t] = rules
		}
		return m
	}
	sets := []faultSet{
		{"fault:lost_responses", each(all,
			map[string]any{"kind": "lose_response_close", "rate": 0.08},
			map[string]any{"kind": "lose_response_hang", "rate": 0.04})},
		{"fault:reset_after_commit", each(all,
			map[string]any{"kind": "reset_after_commit", "rate": 0.08},
			map[string]any{"kind": "truncate_after_commit", "rate": 0.03})},
		{"fault:delays", each(all,
			map[string]any{"kind": "delay", "delay_ms": 2500, "rate": 0.2, "scope": "any"})},
		{"fault:429_503_storm", map[string][]map[string]any{
			"yookassa": {{"kind": "http_429", "retry_after_ms": 1000, "rate": 0.5}},
			"onec":     {{"kind": "http_503", "rate": 0.5}},
			"bitrix24": {{"kind": "http_503", "retry_after_ms": 1000, "rate": 0.4, "scope": "any"}},
		}},
		{"fault:key_dropping_connector", map[string][]map[string]any{
			"bitrix24": {{"kind": "ignore_key", "rate": 0.3}, {"kind": "lose_response_close", "rate": 0.1}},
		}},
	}
	if knownDefects {
		sets = append(sets,
			faultSet{"fault:502_after_commit_key_dropped", map[string][]map[string]any{
				"bitrix24": {{"kind": "ignore_key", "rate": 0.5}, {"kind": "raw_response", "status": 502, "body": "Bad Gateway", "commit": true, "rate": 0.2}},
			}},
			faultSet{"fault:native_key_dropped", each(native, map[string]any{"kind": "ignore_key", "rate": 0.2},
				map[string]any{"kind": "lose_response_close", "rate": 0.1})})
	}
	return sets
}

// nemesis runs the process track and the target track side by side, records
// every action as a window, and keeps every replica running between actions.
type nemesis struct {
	s     *soak
	kinds map[string]bool
	rng   *rand.Rand
	rngMu sync.Mutex
	gap   time.Duration
	fault time.Duration
	// process actions, in order (cycled).
	actions []string
	faults  []faultSet

	mu      sync.Mutex
	windows []Window
	busy    map[int]bool
}

func (n *nemesis) intn(k int) int {
	n.rngMu.Lock()
	defer n.rngMu.Unlock()
	return n.rng.IntN(k)
}

func (n *nemesis) record(w Window) {
	n.mu.Lock()
	n.windows = append(n.windows, w)
	n.mu.Unlock()
	n.s.logf("nemesis %-28s %s  %s", w.Kind, w.End.Sub(w.Start).Round(100*time.Millisecond), strings.TrimSpace(w.Detail+" "+w.Note))
}

func (n *nemesis) timeline() []Window {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Window(nil), n.windows...)
}

// pickReplica chooses a replica no other action holds.
func (n *nemesis) pickReplica() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	for range 10 {
		i := n.intn(len(n.s.replicas))
		if !n.busy[i] {
			n.busy[i] = true
			return i
		}
	}
	return -1
}

func (n *nemesis) release(i int) {
	n.mu.Lock()
	delete(n.busy, i)
	n.mu.Unlock()
}

func (n *nemesis) isBusy(i int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.busy[i]
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}

// processTrack runs the process actions until ctx ends; the action under
// way always completes its recovery.
func (n *nemesis) processTrack(ctx context.Context) {
	if len(n.actions) == 0 {
		return
	}
	for i := 0; ; i++ {
		if !ctxsleep.For(ctx, n.gap) {
			return
		}
		a := n.actions[i%len(n.actions)]
		n.do(a)
	}
}

func (n *nemesis) do(action string) {
	s := n.s
	start := time.Now()
	w := Window{Kind: action, Start: start}
	switch {
	case action == NemKill:
		r := n.pickReplica()
		if r < 0 {
			return
		}
		defer n.release(r)
		_ = s.replicas[r].Kill9()
		w.Detail = s.replicas[r].Name
		time.Sleep(time.Second) // down for a moment, as a crashed process is
		s.startReplica(r)
	case strings.HasPrefix(action, NemCrash+":"):
		point := strings.TrimPrefix(action, NemCrash+":")
		r := n.pickReplica()
		if r < 0 {
			return
		}
		defer n.release(r)
		p := s.replicas[r]
		_ = p.Kill9()
		at := 2 + n.intn(20)
		w.Detail = fmt.Sprintf("%s at pass %d of %s", p.Name, at, point)
		if err := p.Start(s.replicaEnv(r, fmt.Sprintf("IDEMGATE_SOAK_CRASH=%s:%d", point, at))...); err != nil {
			w.Note = err.Error()
			break
		}
		p.Expect()
		if p.Wait(25 * time.Second) {
			w.Note = "crash point reached"
		} else {
			w.Note = "crash point not reached in 25s: killed"
			_ = p.Kill9()
		}
		s.startReplica(r)
	case action == NemPause:
		r := n.pickReplica()
		if r < 0 {
			return
		}
		defer n.release(r)
		p := s.replicas[r]
		d := s.cfg.lease + 4*time.Second
		w.Detail = fmt.Sprintf("%s stopped %v (lease %v)", p.Name, d, s.cfg.lease)
		if err := p.Signal(syscall.SIGSTOP, false); err != nil {
			w.Note = err.Error()
			break
		}
		time.Sleep(d) // the replica stays stopped past its lease
		_ = p.Signal(syscall.SIGCONT, false)
	case action == NemPG:
		w.Detail = fmt.Sprintf("PostgreSQL down %v", s.cfg.pgDown)
		if err := s.pg.StopImmediate(); err != nil {
			w.Note = err.Error()
		}
		time.Sleep(s.cfg.pgDown) // the database stays down this long
		if err := s.pg.Start(); err != nil {
			w.Note += " restart: " + err.Error()
		}
	case action == NemNATS:
		w.Detail = "nats-server kill -9, restarted on its store after 2s"
		_ = s.nats.Kill9()
		time.Sleep(2 * time.Second) // the broker stays down a moment
		if err := s.nats.Start(); err != nil {
			w.Note = err.Error()
		}
		_ = s.nats.WaitReady(context.Background(), 30*time.Second)
	}
	w.End = time.Now()
	n.record(w)
}

// faultTrack cycles the sandbox fault windows until ctx ends.
func (n *nemesis) faultTrack(ctx context.Context) {
	if len(n.faults) == 0 {
		return
	}
	for i := 0; ; i++ {
		if !ctxsleep.For(ctx, n.gap/2) {
			return
		}
		fs := n.faults[i%len(n.faults)]
		w := Window{Kind: fs.name, Start: time.Now()}
		var parts []string
		for target, rules := range fs.rules {
			if err := n.s.injectFaults(target, rules); err != nil {
				w.Note += err.Error() + "; "
			}
			parts = append(parts, target)
		}
		w.Detail = "on " + strings.Join(parts, ",")
		done := !ctxsleep.For(ctx, n.fault)
		n.s.clearFaults()
		w.End = time.Now()
		n.record(w)
		if done {
			return
		}
	}
}

// supervise restarts replicas that died on their own (or whose crash
// action is over) and records each unexpected exit.
func (n *nemesis) supervise(ctx context.Context) {
	every(ctx, 500*time.Millisecond, func() {
		for i, p := range n.s.replicas {
			if n.isBusy(i) || p.Running() {
				continue
			}
			_, unexpected, last := p.Stats()
			n.s.logf("supervisor: %s not running (unexpected exits so far %d, last %s): restarting", p.Name, unexpected, last)
			n.record(Window{Kind: "replica_exit", Detail: p.Name, Note: last, Start: time.Now(), End: time.Now()})
			n.s.startReplica(i)
		}
	})
}

// injectFaults posts rules to one emulator's admin API.
func (s *soak) injectFaults(target string, rules []map[string]any) error {
	base, ok := s.sb.urls[target]
	if !ok {
		return fmt.Errorf("no emulator %s", target)
	}
	b, _ := json.Marshal(rules)
	resp, err := httpClient.Post(base+"/_sandbox/faults", "application/json", strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s faults: %s", target, resp.Status)
	}
	return nil
}

func (s *soak) clearFaults() {
	for name, base := range s.sb.urls {
		req, _ := http.NewRequest(http.MethodDelete, base+"/_sandbox/faults", nil)
		if resp, err := httpClient.Do(req); err == nil {
			resp.Body.Close()
		} else {
			fmt.Fprintf(os.Stderr, "soak: clear faults of %s: %v\n", name, err)
		}
	}
}
