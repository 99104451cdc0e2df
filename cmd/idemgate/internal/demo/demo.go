package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/sandbox"
)

// Runtime is the running system the scenarios drive: one idemgate replica
// already consuming commands, its journal and the emulators it calls.
type Runtime struct {
	// Env is the daemon's environment, the first part of every key.
	Env string
	// NATSURL reaches the NATS server the daemon consumes from.
	NATSURL string
	// Journal is the daemon's journal, read (Get, Attempts) to count
	// reconciliations and attempts; the demo never writes to it.
	Journal journal.Store
	// JournalKind and NATSKind describe the set-up in the output, e.g.
	// "SQLite (embedded, <path>)", "embedded JetStream".
	JournalKind string
	NATSKind    string
	// MultiMachine is true when the journal is shared across machines
	// (PostgreSQL); with SQLite the demo says that several machines need
	// PostgreSQL.
	MultiMachine bool
	Sandboxes    *Sandboxes
	// Routes maps operation types to the adapter names the daemon routes
	// them to; a scenario whose operation has no route is skipped.
	Routes map[string]string
	// StartReplica starts one more replica in this process, sharing the
	// journal and the durable consumer, named owner; stop drains it. Nil
	// skips the racing scenario.
	StartReplica func(ctx context.Context, owner string) (stop func() error, err error)
	// Approve records a person's approval of the intent key, as `idemgate
	// approve KEY --reason … --as who` does. Nil skips the approval
	// scenario.
	Approve func(ctx context.Context, key, who, reason string) error
	// ApprovalAbove is the amount (minor units, RUB) above which a charge
	// waits for a person in this daemon's policy.
	ApprovalAbove int64
	// StopCoordinatorAt arms a one-shot stop: the coordinator's run of the
	// process processKey stops dead once step's outcome is settled, as a
	// killed daemon's would — its process lease held, its command neither
	// acknowledged nor returned — and the channel is closed. Nil skips the
	// scenario that needs it.
	StopCoordinatorAt func(processKey, step string) <-chan struct{}
}

// Options tune a demo run.
type Options struct {
	// Out receives the live progress (and nothing else).
	Out io.Writer
	// Terminal redraws waiting lines in place with a spinner; false prints
	// plain lines only.
	Terminal bool
	// ScenarioTimeout bounds each scenario. Default 30s.
	ScenarioTimeout time.Duration
	// Only, when set, runs just the scenarios with these IDs (see IDs).
	Only []string
	// Clock times the scenarios. Default time.Now.
	Clock func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.ScenarioTimeout <= 0 {
		o.ScenarioTimeout = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// ErrSetup is wrapped by errors that kept the demo from running at all.
var ErrSetup = errors.New("demo: set-up failed")

// IDs returns the scenario IDs in the order they run.
func IDs() []string {
	ids := make([]string, 0, len(scenarios))
	for _, s := range scenarios {
		ids = append(ids, s.id)
	}
	return ids
}

// Run drives every scenario against rt, printing progress to opts.Out, and
// returns the report. A scenario that fails or times out is a failed row,
// not an error; the error is for a demo that could not start (NATS
// unreachable) or a cancelled context.
func Run(ctx context.Context, rt Runtime, opts Options) (Report, error) {
	opts = opts.withDefaults()
	s, err := newSession(rt, opts)
	if err != nil {
		return Report{}, err
	}
	defer s.close()
	start := opts.Clock()
	rep := Report{Journal: rt.JournalKind, NATS: rt.NATSKind}
	selected := selectScenarios(opts.Only)
	for i, sc := range selected {
		s.p.scenario(i+1, len(selected), sc.name, sc.target)
		row := Row{Scenario: sc.name, Target: sc.target}
		if reason := s.skipReason(sc); reason != "" {
			row.Skipped = reason
			s.p.step("skipped: %s", reason)
			rep.Rows = append(rep.Rows, row)
			continue
		}
		scCtx, cancel := context.WithTimeoutCause(ctx, opts.ScenarioTimeout,
			fmt.Errorf("scenario %q did not finish within %v", sc.name, opts.ScenarioTimeout))
		t0 := opts.Clock()
		err := sc.run(scCtx, s, &row)
		cancel()
		row.Elapsed = opts.Clock().Sub(t0)
		if err != nil {
			row.Unfinished = true
			row.check("finished", false, "%v", err)
			s.p.step("FAILED: %v", err)
		} else {
			s.p.step("%s in %s", row.Verdict(), row.Elapsed.Round(10*time.Millisecond))
		}
		rep.Rows = append(rep.Rows, row)
		if ctx.Err() != nil {
			for _, rest := range selected[i+1:] {
				r := Row{Scenario: rest.name, Target: rest.target, Unfinished: true}
				r.check("finished", false, "not run: %v", context.Cause(ctx))
				rep.Rows = append(rep.Rows, r)
			}
			break
		}
	}
	rep.Elapsed = opts.Clock().Sub(start)
	if ctx.Err() != nil {
		return rep, fmt.Errorf("demo stopped: %w", context.Cause(ctx))
	}
	return rep, nil
}

func selectScenarios(only []string) []scenario {
	if len(only) == 0 {
		return scenarios
	}
	want := map[string]bool{}
	for _, id := range only {
		want[id] = true
	}
	var out []scenario
	for _, s := range scenarios {
		if want[s.id] {
			out = append(out, s)
		}
	}
	return out
}

// session is one demo run's connection and helpers.
type session struct {
	rt    Runtime
	opts  Options
	p     *progress
	nc    *nats.Conn
	prod  *producer.Client
	col   *collector
	runID string
}

func newSession(rt Runtime, opts Options) (*session, error) {
	if rt.Sandboxes == nil || rt.Journal == nil || rt.NATSURL == "" || rt.Env == "" {
		return nil, fmt.Errorf("%w: runtime needs Env, NATSURL, Journal and Sandboxes", ErrSetup)
	}
	nc, err := nats.Connect(rt.NATSURL, nats.Name("idemgate-demo-agent"))
	if err != nil {
		return nil, fmt.Errorf("%w: connect to NATS at %s: %w", ErrSetup, rt.NATSURL, err)
	}
	prod, err := producer.New(nc, "")
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	col, err := collect(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	return &session{rt: rt, opts: opts, p: newProgress(opts.Out, opts.Terminal), nc: nc, prod: prod, col: col, runID: newRunID()}, nil
}

func (s *session) close() {
	s.col.close()
	s.nc.Close()
}

// newRunID makes keys unique per run, so that a journal or a stream kept
// from an earlier run (a given --data-dir or --journal-url) replays nothing.
func newRunID() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz"
	b := make([]byte, 6)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return fmt.Sprintf("t%d", time.Now().UnixNano()%1e6)
		}
		b[i] = alphabet[n.Int64()]
	}
	return string(b)
}

func (s *session) skipReason(sc scenario) string {
	if _, ok := s.rt.Routes[sc.op]; !ok {
		return fmt.Sprintf("no adapter is routed for %s in this build", sc.op)
	}
	if sc.needsReplica && s.rt.StartReplica == nil {
		return "no second replica can be started here"
	}
	if sc.needsApproval && (s.rt.Approve == nil || s.rt.ApprovalAbove <= 0) {
		return "no approval policy gates charges here"
	}
	if sc.needsStop && s.rt.StopCoordinatorAt == nil {
		return "no coordinator can be stopped here"
	}
	return ""
}

// intent is one business intent of a scenario.
type intent struct {
	op      string
	id      string
	payload map[string]any
}

func (s *session) intent(op, name string, payload map[string]any) intent {
	return intent{op: op, id: "demo-" + s.runID + "-" + name, payload: payload}
}

func (i intent) key(env string) string {
	return operation.Key{Env: env, Operation: i.op, IntentID: i.id, Version: operation.DefaultKeyVersion}.String()
}

// command builds the envelope an agent sends for the intent under eventID.
func (s *session) command(in intent, eventID string) (operation.Command, error) {
	body, err := json.Marshal(in.payload)
	if err != nil {
		return operation.Command{}, fmt.Errorf("encode payload: %w", err)
	}
	cmd := operation.Command{EventID: "evt-" + s.runID + "-" + eventID, Operation: in.op, IntentID: in.id, Payload: body}
	if t, ok := operation.DefaultRegistry().Lookup(in.op); ok && t.RequiresApproval {
		cmd.ApprovalID = "appr-" + s.runID + "-" + eventID
	}
	return cmd, nil
}

// publish sends a command and counts it; dup reports that JetStream's
// duplicate window dropped it (same event id as an earlier command).
func (s *session) publish(ctx context.Context, row *Row, cmd operation.Command) (dup bool, err error) {
	ack, err := s.prod.Publish(ctx, cmd)
	if err != nil {
		return false, err
	}
	row.Sent++
	return ack.Duplicate, nil
}

// await waits for the final result of every event id.
func (s *session) await(ctx context.Context, label string, eventIDs []string) (map[string]operation.Result, error) {
	t0 := s.opts.Clock()
	res, err := s.col.wait(ctx, eventIDs, func(have, want int) { s.p.waiting(label, have, want) })
	if err != nil {
		return res, err
	}
	s.p.step("%d/%d results in %s", len(res), len(eventIDs), s.opts.Clock().Sub(t0).Round(10*time.Millisecond))
	return res, nil
}

// tally counts replays and conflicts among final results.
func tally(row *Row, results map[string]operation.Result) {
	for _, r := range results {
		if r.Replayed {
			row.Replays++
		}
		if r.Status == operation.ResultConflict {
			row.Conflicts++
		}
	}
}

// ledgerMark remembers where a target's ledger stood.
type ledgerMark struct {
	target sandbox.Target
	seq    int
}

func mark(t sandbox.Target) ledgerMark { return ledgerMark{target: t, seq: t.Ledger().Total()} }

// since returns the effects recorded after the mark.
func (m ledgerMark) since() []sandbox.Effect {
	all := m.target.Ledger().Effects()
	if m.seq >= len(all) {
		return nil
	}
	return all[m.seq:]
}

// judgeEffects counts the target's new effects into row and checks the
// first guarantee of every scenario: one effect per intent, and no key
// holding two objects.
func judgeEffects(row *Row, m ledgerMark, intents int) {
	effects := m.since()
	row.Effects = len(effects)
	perKey := map[string]int{}
	for _, e := range effects {
		perKey[e.Key]++
	}
	var twice []string
	for k, n := range perKey {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ×%d", k, n))
		}
	}
	sort.Strings(twice)
	switch {
	case len(twice) > 0:
		row.check("one effect per intent", false, "%d effects in the %s ledger for %d intents; keys with several objects: %v",
			len(effects), m.target.Name(), intents, twice)
	case len(effects) != intents:
		row.check("one effect per intent", false, "%d effects in the %s ledger for %d intents", len(effects), m.target.Name(), intents)
	default:
		row.check("one effect per intent", true, "%d effect(s) in the %s ledger for %d intent(s), no key twice",
			len(effects), m.target.Name(), intents)
	}
}

// attempts reads the journal's attempts trail of a key.
func (s *session) attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	atts, err := s.rt.Journal.Attempts(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("journal attempts of %s: %w", key, err)
	}
	return atts, nil
}

// countKinds splits a key's attempts into calls to the target (execute) and
// reconciliations that settled the outcome by a lookup.
func countKinds(atts []journal.Attempt) (executes, reconciled int) {
	for _, a := range atts {
		switch a.Kind {
		case "execute":
			executes++
		case "reconcile":
			if a.Outcome == journal.OutcomeSucceeded || a.Outcome == journal.OutcomeFailedFinal {
				reconciled++
			}
		}
	}
	return executes, reconciled
}
