package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/internal/testkit/childproc"
	"github.com/idemgate/idemgate/internal/testkit/natsproc"
	"github.com/idemgate/idemgate/internal/testkit/pgproc"
)

// soak is one run.
type soak struct {
	cfg    config
	stdout io.Writer
	rng    *mrand.Rand

	pg        *pgproc.Server
	nats      *natsproc.Node
	sbCmd     *exec.Cmd
	sb        sandboxInfo
	replicas  []*childproc.Process
	adminAddr []string
	// httpAPI is the HTTP API's address on the first replica, httpToken
	// its bearer token (the sensitive phase speaks to it).
	httpAPI   string
	httpToken string
	nc        *nats.Conn
	js        jetstream.JetStream
	wl        *workload
	// dec decides the approval-gated charges (approvals.go); approverToken
	// is its token for the HTTP API.
	dec           *decider
	approverToken string
	nem           *nemesis
	logMu         sync.Mutex
	runLog        *os.File
}

// RunInfo describes the run in the report.
type RunInfo struct {
	Seed     uint64   `json:"seed"`
	Rate     float64  `json:"rate"`
	Duration string   `json:"duration"`
	Nemesis  []string `json:"nemesis"`
	Break    string   `json:"break,omitempty"`
	Replicas int      `json:"replicas"`
	Horizons string   `json:"horizons"`
	Elapsed  string   `json:"elapsed"`
	Settled  string   `json:"settled_in"`
	// Held is each replica's longest hold of a delivery, with the bound
	// (held_too_long).
	Held       string   `json:"held"`
	SettleOK   bool     `json:"settled"`
	Restarts   []string `json:"replica_starts"`
	Unexpected int      `json:"unexpected_exits"`
	PubRetries int64    `json:"publish_retries"`
	OverBudget bool     `json:"over_budget,omitempty"`
	Out        string   `json:"out"`
}

func (s *soak) logf(format string, args ...any) {
	line := fmt.Sprintf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintln(s.stdout, line)
	if s.runLog != nil {
		fmt.Fprintln(s.runLog, line)
	}
}

func (s *soak) bin(name string) string { return filepath.Join(s.cfg.binDir, name) }

func (s *soak) run(ctx context.Context) (Report, error) {
	var err error
	s.runLog, err = os.Create(filepath.Join(s.cfg.out, "logs", "soak.log"))
	if err != nil {
		return Report{}, err
	}
	if err := s.setup(ctx); err != nil {
		return Report{}, err
	}
	kinds := map[string]bool{}
	for _, k := range strings.Split(s.cfg.nemesis, ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds[k] = true
		}
	}
	s.nem = &nemesis{s: s, kinds: kinds, rng: mrand.New(mrand.NewPCG(s.cfg.seed+7, s.cfg.seed)), gap: s.cfg.gap,
		fault: s.cfg.faultFor, busy: map[int]bool{}}
	for _, k := range []string{NemKill, NemCrash, NemPause, NemPG, NemNATS} {
		if !kinds[k] {
			continue
		}
		if k == NemCrash {
			points := crashpoint.Points
			if !s.cfg.smoke && s.cfg.processShare > 0 {
				// The coordinator's points too (the smoke's 150 s hold the
				// operations' only; the Go tests kill a coordinator at each).
				points = append(slices.Clone(points), crashpoint.ProcessPoints...)
			}
			for _, p := range points {
				if at := breakRuns[s.cfg.brk].crashAt; at != nil && !slices.Contains(at, p) {
					continue
				}
				s.nem.actions = append(s.nem.actions, NemCrash+":"+string(p))
			}
			continue
		}
		s.nem.actions = append(s.nem.actions, k)
	}
	if kinds[NemFaults] {
		s.nem.faults = faultSets(s.cfg.knownDefects)
		if f := breakRuns[s.cfg.brk].faults; f != nil {
			s.nem.faults = f
		}
	}
	s.logf("soak: %d replicas, %.0f commands/s for %v, nemesis %v, seed %d, out %s", s.cfg.replicas, s.cfg.rate, s.cfg.duration,
		append(s.nem.actions, faultNames(s.nem.faults)...), s.cfg.seed, s.cfg.out)

	// Workload and nemesis.
	s.wl = newWorkload(s.js, "soak", "cnry"+randHex(6), s.cfg.rate, s.cfg.crmRate, s.cfg.seed, s.cfg.keyless)
	s.wl.procShare = s.cfg.processShare
	if _, err := s.nc.Subscribe(replySubject, s.wl.onReply); err != nil {
		return Report{}, err
	}
	wctx, wcancel := context.WithTimeout(ctx, s.cfg.duration)
	defer wcancel()
	supCtx, supStop := context.WithCancel(ctx)
	var tracks sync.WaitGroup
	tracks.Add(3)
	go func() { defer tracks.Done(); s.nem.processTrack(wctx) }()
	go func() { defer tracks.Done(); s.nem.faultTrack(wctx) }()
	go func() { defer tracks.Done(); s.nem.supervise(supCtx) }()
	hw := &heldWatch{max: map[string]float64{}}
	heldCtx, heldStop := context.WithCancel(ctx)
	heldDone := make(chan struct{})
	go func() { defer close(heldDone); s.watchHeld(heldCtx, hw) }()
	s.dec = newDecider(s)
	decCtx, decStop := context.WithCancel(ctx)
	decDone := make(chan struct{})
	go func() { defer close(decDone); s.dec.run(decCtx) }()
	stopDecider := func() { decStop(); <-decDone }
	start := time.Now()
	progressDone := make(chan struct{})
	go s.progress(wctx, progressDone)
	werr := s.wl.run(wctx, s.cfg.publishers)
	end := time.Now()
	<-progressDone
	if werr != nil {
		supStop()
		tracks.Wait()
		heldStop()
		<-heldDone
		stopDecider()
		return Report{}, werr
	}
	s.logf("workload done: %d messages in %v; waiting for the nemesis to recover", len(s.wl.sent), end.Sub(start).Round(time.Second))
	// The nemesis finishes its current action (with its recovery).
	supStop()
	tracks.Wait()
	s.clearFaults()
	for i, p := range s.replicas {
		_ = p.Signal(syscall.SIGCONT, false)
		if !p.Running() {
			s.startReplica(i)
		}
	}

	// Settle.
	settleStart := time.Now()
	settled := s.settle(ctx)
	settleTook := time.Since(settleStart).Round(time.Second)
	s.logf("settle: %v after %v", map[bool]string{true: "settled", false: "NOT settled (timeout)"}[settled], settleTook)

	// The sensitive phase, on a quiet system, then settle what it sent.
	sc := newSecretCanaries()
	var sens sensitiveResult
	if settled {
		sens = s.sensitivePhase(ctx, sc)
		settled = s.settle(ctx)
		s.logf("sensitive phase done: %v", map[bool]string{true: "settled", false: "NOT settled (timeout)"}[settled])
	} else {
		sens.notes = append(sens.notes, "the sensitive phase did not run: the run had not settled")
	}
	close(s.wl.giveUp)
	stopDecider()

	h, err := s.collect(ctx)
	heldStop()
	<-heldDone
	if err != nil {
		return Report{}, err
	}
	h.SecretCanaries = sc.needles()
	h.Secrets = append(h.Secrets, s.httpToken)
	h.Texts = append(h.Texts, sens.texts...)
	h.Start, h.End = start, end
	h.HeldMax, h.HeldBound = hw.snapshot(), s.heldBound().Seconds()
	if err := saveHistory(s.cfg.out, h); err != nil {
		return Report{}, err
	}
	rep := Check(h, s.cfg.knownSet())
	info := &RunInfo{Seed: s.cfg.seed, Rate: s.cfg.rate, Duration: s.cfg.duration.String(), Nemesis: append(s.nem.actions, faultNames(s.nem.faults)...),
		Break: string(s.cfg.brk), Replicas: s.cfg.replicas, Settled: settleTook.String(), SettleOK: settled, Out: s.cfg.out,
		Horizons:   fmt.Sprintf("lease_ttl %v, call_timeout 4s, heartbeat 2s, ack_wait 15s, duplicate_window 30s, retry.max_elapsed 8s, reconciler 1s", s.cfg.lease),
		PubRetries: s.wl.retries.Load(), Held: heldText(h.HeldMax, h.HeldBound)}
	for _, p := range s.replicas {
		starts, unexpected, _ := p.Stats()
		info.Restarts = append(info.Restarts, fmt.Sprintf("%s:%d", p.Name, starts))
		info.Unexpected += unexpected
	}
	rep.Run = info
	c := s.dec.counts()
	rep.Notes = append(rep.Notes, fmt.Sprintf("approvals: %d charges waited for a person; the decider approved %d, denied %d, left %d to expire (%d rounds failed, the first replica down)",
		c["approve"]+c["deny"]+c["leave"], c["approve"], c["deny"], c["leave"], s.dec.failures))
	rep.Notes = append(rep.Notes, sens.notes...)
	if !settled {
		rep.Notes = append(rep.Notes, "the system did not settle within --settle: unsettled rows and lost results below may only be late")
	}
	return rep, nil
}

func faultNames(fs []faultSet) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *soak) progress(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	every(ctx, 15*time.Second, func() {
		s.wl.mu.Lock()
		n, acked := len(s.wl.sent), 0
		for _, x := range s.wl.sent {
			if !x.Acked.IsZero() {
				acked++
			}
		}
		s.wl.mu.Unlock()
		s.logf("progress: %d sent, %d acked by JetStream, %d publishing", n, acked, s.wl.inflight.Load())
		s.scrapeMetrics()
	})
}
