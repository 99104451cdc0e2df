package main

import (
	"io"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/crashpoint"
)

// TestBreakRuns: every break a soak build knows (crashpoint.Breaks) has a
// run aimed at it with a known invariant to breach, --break takes exactly
// those names, and --list-breaks prints them for scripts/soak.
func TestBreakRuns(t *testing.T) {
	if len(breakRuns) != len(crashpoint.Breaks) {
		t.Errorf("%d break runs for %d breaks", len(breakRuns), len(crashpoint.Breaks))
	}
	var want strings.Builder
	for _, b := range crashpoint.Breaks {
		r, ok := breakRuns[b]
		if !ok {
			t.Errorf("%s: no break run", b)
			continue
		}
		if !knownInvariant(r.invariant) || r.tune == nil {
			t.Errorf("%s: invariant %q, tune set %v", b, r.invariant, r.tune != nil)
		}
		c, err := parseFlags([]string{"--break", string(b)}, io.Discard)
		if err != nil || c.brk != b || c.nemesis == strings.Join(allNemeses, ",") {
			t.Errorf("--break %s: %+v, %v (its nemesis aimed at the break)", b, c, err)
		}
		want.WriteString(string(b) + ":" + r.invariant + "\n")
	}
	var got strings.Builder
	if err := listBreaks(&got); err != nil || got.String() != want.String() {
		t.Errorf("--list-breaks = %q, %v; want %q", got.String(), err, want.String())
	}
	if _, err := parseFlags([]string{"--break", "no_such_break"}, io.Discard); err == nil || !strings.Contains(err.Error(), string(crashpoint.UnboundedWait)) {
		t.Errorf("an unknown break: %v", err)
	}
	code, err := run(t.Context(), []string{"--list-breaks"}, &got)
	if code != 0 || err != nil {
		t.Errorf("--list-breaks: exit %d, %v", code, err)
	}
}
