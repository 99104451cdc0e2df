package demo

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Check is one guarantee judged in a scenario.
type Check struct {
	// Guarantee names what must hold, e.g. "one effect per intent".
	Guarantee string
	Pass      bool
	// Detail says what was measured.
	Detail string
}

// Row is the outcome of one scenario: what was sent, what the target did (as
// its sandbox ledger counts it) and the guarantees judged.
type Row struct {
	Scenario string
	// Target is the sandbox emulator the scenario's commands reach.
	Target string
	// Sent counts commands published, duplicates included.
	Sent int
	// Intents counts distinct business intents (operation keys).
	Intents int
	// Effects counts objects the target created during the scenario,
	// counted in its sandbox ledger.
	Effects int
	// Replays counts results answered from the journal (replayed: true).
	Replays int
	// Conflicts counts results with status conflict.
	Conflicts int
	// Reconciled counts operations whose unknown outcome a lookup by key
	// settled.
	Reconciled int
	// Elapsed is the scenario's wall time.
	Elapsed time.Duration
	// Skipped, when set, says why the scenario did not run; a skipped row
	// neither passes nor fails the demo.
	Skipped string
	// Unfinished marks a scenario cut short (timeout, error): its counts
	// after Sent and Intents were not taken.
	Unfinished bool
	Checks     []Check
	// Notes are observations that are not guarantees (which replica ran
	// what, how long a Retry-After held a retry back).
	Notes []string
}

// Pass reports whether every guarantee of a scenario that ran held. A row
// that ran without any judged guarantee does not pass.
func (r Row) Pass() bool {
	if r.Skipped != "" {
		return true
	}
	if len(r.Checks) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

// Verdict is PASS, FAIL or SKIP.
func (r Row) Verdict() string {
	switch {
	case r.Skipped != "":
		return "SKIP"
	case r.Pass():
		return "PASS"
	default:
		return "FAIL"
	}
}

// check appends a judged guarantee.
func (r *Row) check(guarantee string, pass bool, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Guarantee: guarantee, Pass: pass, Detail: fmt.Sprintf(format, args...)})
}

// note appends an observation.
func (r *Row) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Report is the whole demo's outcome.
type Report struct {
	Rows []Row
	// Journal and NATS describe what ran ("SQLite (embedded)", "PostgreSQL").
	Journal string
	NATS    string
	Elapsed time.Duration
}

// Pass reports whether at least one scenario ran and every guarantee held.
func (r Report) Pass() bool {
	ran := 0
	for _, row := range r.Rows {
		if !row.Pass() {
			return false
		}
		if row.Skipped == "" {
			ran++
		}
	}
	return ran > 0
}

// Failed lists the guarantees that did not hold, as "scenario: guarantee".
func (r Report) Failed() []string {
	var out []string
	for _, row := range r.Rows {
		if row.Skipped != "" {
			continue
		}
		if len(row.Checks) == 0 {
			out = append(out, row.Scenario+": no guarantee was judged")
		}
		for _, c := range row.Checks {
			if !c.Pass {
				out = append(out, row.Scenario+": "+c.Guarantee)
			}
		}
	}
	return out
}

// counts returns the judged and held guarantees.
func (r Report) counts() (judged, held int) {
	for _, row := range r.Rows {
		for _, c := range row.Checks {
			judged++
			if c.Pass {
				held++
			}
		}
	}
	return judged, held
}

// WriteTable writes the closing table: one line per scenario with its
// counts, then every guarantee with its verdict and what was measured.
func (r Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tTARGET\tSENT\tINTENTS\tEFFECTS\tREPLAYS\tCONFLICTS\tRECONCILED\tTIME\tVERDICT")
	for _, row := range r.Rows {
		if row.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\t%s\n", row.Scenario, row.Target, row.Verdict())
			continue
		}
		if row.Unfinished {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t?\t?\t?\t?\t%s\t%s\n", row.Scenario, row.Target, row.Sent, row.Intents,
				row.Elapsed.Round(10*time.Millisecond), row.Verdict())
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", row.Scenario, row.Target, row.Sent, row.Intents,
			row.Effects, row.Replays, row.Conflicts, row.Reconciled, row.Elapsed.Round(10*time.Millisecond), row.Verdict())
	}
	_ = tw.Flush()
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, "Guarantees:")
	for _, row := range r.Rows {
		fmt.Fprintf(ew, "  %s\n", row.Scenario)
		if row.Skipped != "" {
			fmt.Fprintf(ew, "    SKIP  %s\n", row.Skipped)
			continue
		}
		if len(row.Checks) == 0 {
			fmt.Fprintln(ew, "    FAIL  no guarantee was judged")
		}
		for _, c := range row.Checks {
			verdict := "PASS"
			if !c.Pass {
				verdict = "FAIL"
			}
			fmt.Fprintf(ew, "    %s  %s: %s\n", verdict, c.Guarantee, c.Detail)
		}
		for _, n := range row.Notes {
			fmt.Fprintf(ew, "          (%s)\n", n)
		}
	}
	fmt.Fprintln(ew)
	if r.Journal != "" || r.NATS != "" {
		fmt.Fprintf(ew, "Ran on: journal %s; NATS %s.\n", orUnknown(r.Journal), orUnknown(r.NATS))
	}
	judged, held := r.counts()
	if r.Pass() {
		fmt.Fprintf(ew, "RESULT: PASS — all %d guarantees held", judged)
	} else {
		fmt.Fprintf(ew, "RESULT: FAIL — %d of %d guarantees held; failed: %s", held, judged, strings.Join(r.Failed(), "; "))
	}
	if r.Elapsed > 0 {
		fmt.Fprintf(ew, " (%s)", r.Elapsed.Round(10*time.Millisecond))
	}
	fmt.Fprintln(ew)
	return ew.err
}

// errWriter keeps the first write error so that table code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
