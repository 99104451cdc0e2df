// Command testreport reads `go test -json` on stdin and prints what plain
// `go test` would (each package's ok/FAIL line, the output of failing tests,
// build errors), then lists every skipped test with its reason, so that
// skips are as visible as failures. With -ci it exits 1 when a test was
// skipped that the allow-list does not name.
//
// The allow-list (-allow FILE) has one allowed skip a line:
//
//	<package, relative to the module> <test name>  # why it may skip
//
// A line without its reason is an error: every allowed skip says why. Blank
// lines and lines starting with '#' are comments.
//
// scripts/test runs it; it is not part of idemgate, imports the standard
// library only, and nothing imports it.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	allowFile := flag.String("allow", "", "allow-list of skips (see the package doc)")
	ci := flag.Bool("ci", false, "exit 1 on a skip the allow-list does not name")
	whole := flag.Bool("whole", false, "the whole suite ran: under -ci, an allow-list entry naming a test that never ran is an error")
	module := flag.String("module", "github.com/idemgate/idemgate", "module path that allow-list packages are relative to")
	flag.Parse()
	var allow []allowed
	if *allowFile != "" {
		f, err := os.Open(*allowFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
		allow, err = parseAllowList(f, *module)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %s: %v\n", *allowFile, err)
			os.Exit(2)
		}
	}
	os.Exit(run(os.Stdin, os.Stdout, allow, *ci, *whole))
}

// event is one test2json event (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

// allowed is one allow-list entry.
type allowed struct {
	pkg, test, reason string
}

// parseAllowList reads an allow-list; packages are relative to module.
func parseAllowList(r io.Reader, module string) ([]allowed, error) {
	var out []allowed
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		entry, reason, ok := strings.Cut(line, "#")
		reason = strings.TrimSpace(reason)
		fields := strings.Fields(entry)
		if !ok || reason == "" {
			return nil, fmt.Errorf("line %d: an allowed skip needs its reason after '#'", n)
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want <package> <test> # reason", n)
		}
		pkg := module
		if fields[0] != "." {
			pkg = module + "/" + strings.TrimPrefix(fields[0], "./")
		}
		out = append(out, allowed{pkg: pkg, test: fields[1], reason: reason})
	}
	return out, sc.Err()
}

type testID struct{ pkg, test string }

type skip struct {
	testID
	reason  string
	allowed string // the allow-list's reason, or ""
}

type report struct {
	w        io.Writer
	buffered map[testID][]string // output of tests still running
	skips    []skip
	failed   []testID
	allow    []allowed
	ran      map[testID]bool // every test that passed, failed or skipped
}

// run copies a readable report of the event stream in to w and returns the
// exit code: 1 under ci when a skip is not allowed, or when whole is set and
// the allow-list names a test that never ran (a stale entry hides nothing
// today but would silently allow a future skip), else 0 (go test's own exit
// status tells failures).
func run(in io.Reader, w io.Writer, allow []allowed, ci, whole bool) int {
	r := &report{w: w, buffered: map[testID][]string{}, allow: allow, ran: map[testID]bool{}}
	rd := bufio.NewReader(in)
	for {
		line, err := rd.ReadString('\n')
		if line != "" {
			r.line(line)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(w, "testreport: reading the test output:", err)
			return 1
		}
	}
	code := r.summary(ci)
	if whole && r.stale() > 0 && ci {
		code = 1
	}
	return code
}

// stale reports the allow-list entries whose test never ran and returns how
// many there are.
func (r *report) stale() int {
	n := 0
	for _, a := range r.allow {
		if !r.ran[testID{a.pkg, a.test}] {
			fmt.Fprintf(r.w, "allow-list names %s %s, which did not run: remove the entry\n", a.pkg, a.test)
			n++
		}
	}
	return n
}

func (r *report) line(line string) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
		fmt.Fprint(r.w, line) // not an event: pass it through
		return
	}
	id := testID{e.Package, e.Test}
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.w, e.Output)
	case e.Test == "":
		r.packageEvent(e)
	case e.Action == "output":
		if !strings.HasPrefix(e.Output, "=== ") {
			r.buffered[id] = append(r.buffered[id], e.Output)
		}
	case e.Action == "fail":
		r.ran[id] = true
		r.flush(id)
		r.failed = append(r.failed, id)
	case e.Action == "skip":
		r.ran[id] = true
		r.skips = append(r.skips, r.newSkip(id))
		delete(r.buffered, id)
	case e.Action == "pass":
		r.ran[id] = true
		delete(r.buffered, id)
	}
}

func (r *report) packageEvent(e event) {
	switch e.Action {
	case "output":
		if e.Output == "PASS\n" { // plain go test leaves it out for passing packages
			return
		}
		fmt.Fprint(r.w, e.Output)
	case "fail":
		// A panic or a timeout ends the package with tests still running:
		// show what they printed.
		var running []testID
		for id := range r.buffered {
			if id.pkg == e.Package {
				running = append(running, id)
			}
		}
		sort.Slice(running, func(i, j int) bool { return running[i].test < running[j].test })
		for _, id := range running {
			r.flush(id)
		}
	}
}

func (r *report) flush(id testID) {
	for _, l := range r.buffered[id] {
		fmt.Fprint(r.w, l)
	}
	delete(r.buffered, id)
}

// newSkip takes the skip's reason from the test's output: its log lines,
// without the "--- SKIP" line itself.
func (r *report) newSkip(id testID) skip {
	var reason []string
	for _, l := range r.buffered[id] {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		reason = append(reason, t)
	}
	s := skip{testID: id, reason: strings.Join(reason, " ")}
	for _, a := range r.allow {
		if a.pkg == id.pkg && a.test == id.test {
			s.allowed = a.reason
		}
	}
	return s
}

func (r *report) summary(ci bool) int {
	if len(r.failed) > 0 {
		fmt.Fprintf(r.w, "\n%d failed:\n", len(r.failed))
		for _, f := range r.failed {
			fmt.Fprintf(r.w, "  FAIL %s %s\n", f.pkg, f.test)
		}
	}
	if len(r.skips) == 0 {
		fmt.Fprintln(r.w, "\nno test skipped")
		return 0
	}
	sort.Slice(r.skips, func(i, j int) bool {
		a, b := r.skips[i], r.skips[j]
		return a.pkg < b.pkg || a.pkg == b.pkg && a.test < b.test
	})
	fmt.Fprintf(r.w, "\n%d skipped:\n", len(r.skips))
	bad := 0
	for _, s := range r.skips {
		mark := "allowed"
		if s.allowed == "" {
			mark = "NOT ALLOWED"
			bad++
		}
		fmt.Fprintf(r.w, "  SKIP %s %s [%s]\n", s.pkg, s.test, mark)
		if s.reason != "" {
			fmt.Fprintf(r.w, "       test says: %s\n", s.reason)
		}
		if s.allowed != "" {
			fmt.Fprintf(r.w, "       allowed:   %s\n", s.allowed)
		}
	}
	if bad > 0 && ci {
		fmt.Fprintf(r.w, "\n%d skipped test(s) not on the allow-list: under CI a skip must be fixed or allowed with its reason\n", bad)
		return 1
	}
	return 0
}
