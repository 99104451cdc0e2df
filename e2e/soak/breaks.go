package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/crashpoint"
)

// breakRun is how a run with one guarantee broken on purpose
// (crashpoint.Break, --break) aims at it, and what its checker must then
// find: a broken variant is short, and its nemesis goes where the breach
// shows.
type breakRun struct {
	// invariant is the one the checker must find breached.
	invariant string
	// tune sets the run's defaults, through def (a flag the command line
	// set keeps its value).
	tune func(def func(flag string, apply func()), c *config)
	// faults replaces the fault windows when the nemesis injects faults
	// (nil: the usual ones).
	faults []faultSet
	// crashAt limits the crash nemesis to these points (nil: every one).
	crashAt []crashpoint.Point
}

// breakRuns has one entry for each crashpoint.Break (TestBreakRuns).
var breakRuns = map[crashpoint.Break]breakRun{
	crashpoint.NoFencing: {
		invariant: InvStale,
		tune: func(def func(string, func()), c *config) {
			def("nemesis", func() { c.nemesis = NemPause + ",faults" })
			def("duration", func() { c.duration = 40 * time.Second })
			def("fault-window", func() { c.faultFor = 40 * time.Second })
		},
		// Slow calls are in flight when a replica is paused; slow lookups
		// keep the new owner's reconcile attempts open when the stale
		// owner wakes up and completes.
		faults: []faultSet{{"fault:slow_calls", map[string][]map[string]any{"onec": slowCalls, "yookassa": slowCalls, "bitrix24": slowCalls}}},
	},
	crashpoint.BlindRetry: {
		invariant: InvBlindRetry,
		tune: func(def func(string, func()), c *config) {
			def("nemesis", func() { c.nemesis = NemFaults })
		},
		faults: []faultSet{{"fault:lost_responses", map[string][]map[string]any{
			"onec": {{"kind": "lose_response_close", "rate": 0.2}}, "yookassa": {{"kind": "reset_after_commit", "rate": 0.2}}}}},
	},
	crashpoint.AckBeforePublish: {
		invariant: InvLost,
		tune: func(def func(string, func()), c *config) {
			def("nemesis", func() { c.nemesis = NemCrash })
		},
		// The crash between the early ack and the publish loses the result.
		crashAt: []crashpoint.Point{crashpoint.BeforePublish},
	},
	crashpoint.UnboundedWait: {
		invariant: InvHeld,
		tune: func(def func(string, func()), c *config) {
			def("nemesis", func() { c.nemesis = NemFaults })
			def("fault-window", func() { c.faultFor = 30 * time.Second })
		},
		// Retryable answers on half the creates: calls retry within their
		// lease while copies on other replicas wait out the same holds and
		// claim the key the moment one ends.
		faults: []faultSet{{"fault:503_storm", map[string][]map[string]any{
			"onec": {{"kind": "http_503", "rate": 0.5}}, "yookassa": {{"kind": "http_503", "rate": 0.5}}}}},
	},
	crashpoint.CompensateUnknown: {
		invariant: InvProcessEffects,
		tune: func(def func(string, func()), c *config) {
			def("nemesis", func() { c.nemesis = NemFaults })
			def("duration", func() { c.duration = 40 * time.Second })
			def("fault-window", func() { c.faultFor = 40 * time.Second })
			def("process-share", func() { c.processShare = 0.03 })
		},
		// Lost answers of charges: their steps' outcomes are unknown until
		// looked up.
		faults: []faultSet{{"fault:lost_charge_responses", map[string][]map[string]any{
			"yookassa": {{"kind": "reset_after_commit", "rate": 0.3}}}}},
	},
	crashpoint.SkipApproval: {
		invariant: InvUnapproved,
		tune: func(def func(string, func()), c *config) {
			def("nemesis", func() { c.nemesis = NemKill })
			def("duration", func() { c.duration = 40 * time.Second })
		},
	},
}

// slowCalls delays most lookups and half the creates.
var slowCalls = []map[string]any{{"kind": "delay", "delay_ms": 3500, "rate": 0.9, "scope": "read"},
	{"kind": "delay", "delay_ms": 3000, "rate": 0.5, "scope": "create"}}

// breakNames lists crashpoint.Breaks for a usage message.
func breakNames() string {
	names := make([]string, 0, len(crashpoint.Breaks))
	for _, b := range crashpoint.Breaks {
		names = append(names, string(b))
	}
	return strings.Join(names, ", ")
}

// parseBreak is --break's value as a crashpoint.Break.
func parseBreak(name string) (crashpoint.Break, error) {
	for _, b := range crashpoint.Breaks {
		if string(b) == name {
			return b, nil
		}
	}
	return "", fmt.Errorf("--break %q: one of %s", name, breakNames())
}

// listBreaks writes each break and the invariant it must breach, one
// "break:invariant" a line, in crashpoint.Breaks' order (scripts/soak
// --prove-breaks reads them).
func listBreaks(w io.Writer) error {
	for _, b := range crashpoint.Breaks {
		if _, err := fmt.Fprintf(w, "%s:%s\n", b, breakRuns[b].invariant); err != nil {
			return err
		}
	}
	return nil
}
