// Command soak is idemgate's fault soak: real processes (three `idemgate run`
// replicas, a throwaway PostgreSQL, a nats-server, the target emulators),
// a steady workload of commands with copies, conflicts, poison and canary
// secrets, a nemesis that kills, pauses, crashes at named points, stops the
// database and the broker and injects target faults, and a checker that
// reads the targets' ledgers, the results, the journal and its trail and the
// logs, and fails when one guarantee was breached. See docs/soak.md.
//
// Run it with scripts/soak, which builds what it needs.
//
// It drives the built binaries from outside and may import any package of
// the module for its clients, emulators and checks; nothing imports it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/crashpoint"
)

// config is the run's settings (flags).
type config struct {
	out, binDir   string
	duration      time.Duration
	rate          float64
	crmRate       float64
	processShare  float64
	publishers    int
	seed          uint64
	nemesis       string
	gap, faultFor time.Duration
	pgDown        time.Duration
	settle        time.Duration
	lease         time.Duration
	replicas      int
	brk           crashpoint.Break
	listBreaks    bool
	known         string
	keyless       bool
	knownDefects  bool
	smoke         bool
	budget        time.Duration
	recheck       string
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
	}
	os.Exit(code)
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.out, "out", "", "output directory (report, logs); default a new folder under $TMPDIR")
	fs.StringVar(&c.binDir, "bin-dir", "", "folder holding idemgate (built with -tags soak) and nats-server")
	fs.DurationVar(&c.duration, "duration", 10*time.Minute, "how long the workload runs")
	fs.Float64Var(&c.rate, "rate", 100, "commands per second")
	fs.Float64Var(&c.crmRate, "crm-rate", 0.8, "new CRM intents (Bitrix24) per second, within the rate: the emulated Enterprise portal admits 5 requests/s and a create costs 3")
	fs.Float64Var(&c.processShare, "process-share", 0.006, "the part of new intents that are checkouts (a process of three steps; each reaches the CRM once)")
	fs.IntVar(&c.publishers, "publishers", 64, "concurrent publishers (each retries its message until PubAck)")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the workload, nemesis and emulator faults (0: from the clock)")
	fs.StringVar(&c.nemesis, "nemesis", strings.Join(allNemeses, ","), "nemesis kinds: "+strings.Join(allNemeses, ",")+" (empty: none)")
	fs.DurationVar(&c.gap, "gap", 8*time.Second, "recovery gap between process nemesis actions")
	fs.DurationVar(&c.faultFor, "fault-window", 12*time.Second, "length of one sandbox fault window")
	fs.DurationVar(&c.pgDown, "pg-down", 20*time.Second, "how long PostgreSQL stays stopped")
	fs.DurationVar(&c.settle, "settle", 3*time.Minute, "longest wait for everything to settle after the workload")
	fs.IntVar(&c.replicas, "replicas", 3, "idemgate run replicas")
	fs.Func("break", "break one guarantee in the daemons (soak build): "+breakNames(), func(v string) (err error) {
		c.brk, err = parseBreak(v)
		return err
	})
	fs.BoolVar(&c.listBreaks, "list-breaks", false, "run no soak: print each --break and the invariant it must breach, break:invariant a line")
	fs.StringVar(&c.known, "known", "", "comma-separated invariants whose breaches are reported as known defects, not failures")
	fs.BoolVar(&c.keyless, "keyless-poison", false, "also send non-JSON poison (no key can be derived)")
	fs.BoolVar(&c.knownDefects, "known-defect-faults", false, "add fault windows that provoke defects known to be open (see docs/soak.md)")
	fs.BoolVar(&c.smoke, "smoke", false, "the CI smoke: 150s workload, every nemesis kind once, short gaps")
	fs.DurationVar(&c.budget, "budget", 0, "fail when the whole run takes longer than this (0: no budget)")
	fs.StringVar(&c.recheck, "recheck", "", "run no soak: check again the history saved in this output folder (writes recheck-report.md/.json there)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// def applies a mode's default to a flag the command line did not set.
	def := func(name string, apply func()) {
		if !set[name] {
			apply()
		}
	}
	if c.smoke {
		def("duration", func() { c.duration = 150 * time.Second })
		def("gap", func() { c.gap = 5 * time.Second })
		def("fault-window", func() { c.faultFor = 10 * time.Second })
		def("settle", func() { c.settle = 100 * time.Second })
		def("budget", func() { c.budget = 6 * time.Minute })
	}
	if c.brk != "" {
		// A broken variant is short and aims its nemesis at the broken
		// guarantee.
		def("duration", func() { c.duration = 30 * time.Second })
		def("settle", func() { c.settle = 25 * time.Second })
		def("gap", func() { c.gap = 3 * time.Second })
		def("budget", func() { c.budget = 0 })
		breakRuns[c.brk].tune(def, &c)
	}
	for _, k := range strings.Split(c.nemesis, ",") {
		if k = strings.TrimSpace(k); k != "" && !slices.Contains(allNemeses, k) {
			return c, fmt.Errorf("--nemesis %q: one of %s", k, strings.Join(allNemeses, ","))
		}
	}
	for _, k := range strings.Split(c.known, ",") {
		if k = strings.TrimSpace(k); k != "" && !knownInvariant(k) {
			return c, fmt.Errorf("--known %q: not an invariant", k)
		}
	}
	if c.rate <= 0 || c.replicas < 1 || c.publishers < 1 {
		return c, errors.New("--rate, --replicas and --publishers must be positive")
	}
	if c.processShare < 0 || c.processShare > 0.5 {
		return c, errors.New("--process-share must be within 0 and 0.5")
	}
	if c.crmRate < 0 {
		return c, errors.New("--crm-rate must not be negative")
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	c.lease = 6 * time.Second
	return c, nil
}

// knownSet is --known as a set.
func (c config) knownSet() map[string]bool {
	known := map[string]bool{}
	for _, k := range strings.Split(c.known, ",") {
		if k = strings.TrimSpace(k); k != "" {
			known[k] = true
		}
	}
	return known
}

func knownInvariant(name string) bool {
	return slices.ContainsFunc(invariantOrder, func(o invariantDoc) bool { return o.name == name })
}

// run is main without the exit: 0 pass, 1 breach, 2 usage, 3 the harness
// itself failed.
func run(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		return 2, err
	}
	if cfg.listBreaks {
		return 0, listBreaks(stdout)
	}
	began := time.Now()
	if cfg.recheck != "" {
		rep, err := recheck(cfg.recheck, cfg.knownSet())
		if err != nil {
			return 3, err
		}
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(filepath.Join(cfg.recheck, "recheck-report.json"), b, 0o644); err != nil {
			return 3, err
		}
		if err := os.WriteFile(filepath.Join(cfg.recheck, "recheck-report.md"), []byte(markdown(rep)), 0o644); err != nil {
			return 3, err
		}
		fmt.Fprintf(stdout, "%s\nreport: %s\n", summary(rep), filepath.Join(cfg.recheck, "recheck-report.md"))
		if !rep.Pass {
			return 1, nil
		}
		return 0, nil
	}
	if cfg.out == "" {
		cfg.out, err = os.MkdirTemp("", "idemgate-soak-")
		if err != nil {
			return 3, err
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.out, "logs"), 0o755); err != nil {
		return 3, err
	}
	// PostgreSQL runs as its own user (when we are root) under this folder.
	if err := os.Chmod(cfg.out, 0o755); err != nil {
		return 3, err
	}
	s := &soak{cfg: cfg, stdout: stdout, rng: rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5eed))}
	defer s.teardown()
	rep, err := s.run(ctx)
	if err != nil {
		return 3, err
	}
	rep.Run.Elapsed = time.Since(began).Round(time.Second).String()
	if cfg.budget > 0 && time.Since(began) > cfg.budget {
		rep.Notes = append(rep.Notes, fmt.Sprintf("over budget: the run took %v, budget %v", time.Since(began).Round(time.Second), cfg.budget))
		rep.Pass = false
		rep.Run.OverBudget = true
	}
	if err := writeReports(cfg.out, rep); err != nil {
		return 3, err
	}
	fmt.Fprintf(stdout, "\n%s\nreport: %s\n", summary(rep), filepath.Join(cfg.out, "soak-report.md"))
	if !rep.Pass {
		return 1, nil
	}
	return 0, nil
}
