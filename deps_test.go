package idemgate_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/idemgate/idemgate/"

// pkg is one package as go list sees it without its test files: its path
// relative to the module ("" for the module's root; the full path for a
// package outside it), its direct imports and every package it depends on
// (go list's Deps), both as full import paths.
type pkg struct {
	rel           string
	inModule      bool
	imports, deps []string
	testImports   []string // what its _test.go files import
	goFiles       bool     // it has Go files besides its tests
}

// listPackages runs go list with args (patterns, and flags such as -tags
// or -deps before them).
func listPackages(t *testing.T, args ...string) []pkg {
	t.Helper()
	args = append([]string{"list", "-f", `{{.ImportPath}}|{{join .Imports ","}}|{{join .Deps ","}}|{{len .GoFiles}}|{{join .TestImports ","}},{{join .XTestImports ","}}`}, args...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	var ps []pkg
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 5 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		p := pkg{rel: f[0], goFiles: f[3] != "0"}
		if f[0]+"/" == mod || strings.HasPrefix(f[0], mod) {
			p.rel, p.inModule = strings.TrimPrefix(strings.TrimPrefix(f[0], mod), strings.TrimSuffix(mod, "/")), true
		}
		if f[1] != "" {
			p.imports = strings.Split(f[1], ",")
		}
		if f[2] != "" {
			p.deps = strings.Split(f[2], ",")
		}
		for _, imp := range strings.Split(f[4], ",") {
			if imp != "" {
				p.testImports = append(p.testImports, imp)
			}
		}
		ps = append(ps, p)
	}
	return ps
}

// suite reports whether rel is a layer's test suite (natstest, journaltest,
// pgtest, adaptertest, httpjsontest, …): a package whose name ends in
// "test", which tests import and which may reach what its layer may not
// (an adapter's suite runs it against its emulator).
func suite(rel string) bool {
	return strings.HasSuffix(rel[strings.LastIndex(rel, "/")+1:], "test")
}

// testMachinery reports whether rel is test or soak machinery: the
// internal/testkit packages, the layers' test suites, the acceptance
// suite and soak (e2e) and the scripts' programs. None is linked into a
// release binary.
func testMachinery(rel string) bool {
	for _, p := range []string{"internal/testkit", "e2e", "scripts"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return suite(rel)
}

// TestDependencyDirection keeps imports flowing one way:
// cmd → worker → consumer → operation/wire, worker → journal/adapters →
// operation → redact, ingest/producer/gateway → wire, with sandbox standing
// alone, and viper only inside cmd. operation imports redact for its secret
// detector (keys are screened by the same rules that mask logs and
// results), journal for the masking of an operator's evidence; journal
// imports operation for the key's grammar (an intent's keys by prefix); redact
// imports nothing of idemgate. wire (the wire contract)
// and internal/startstop import the standard library only. worker reaches
// JetStream only through consumer: it imports no nats.go package.
// adapters and sandbox never meet: emulate, which derives a declared
// target's emulator from its declaration, imports both, and only the
// binary, e2e and the adapters' *test suites import it; those suites alone
// of adapters may reach sandbox.
//
// The layer rules (forbidden, stdlibOnly) hold for every package a package
// depends on, directly or not (go list's Deps): a layer cannot reach a
// forbidden one through a third package. The rules about what a package
// itself imports (viper, nats.go in the worker, the SDK) read its own
// imports.
func TestDependencyDirection(t *testing.T) {
	// For each package prefix: the project packages it must not import.
	forbidden := map[string][]string{
		"operation":  {""}, // standard library and redact only (checked below)
		"redact":     {""}, // standard library only (checked below)
		"journal":    {"consumer", "worker", "ingest", "cmd", "adapters", "sandbox", "producer", "emulate"},
		"migrations": {"journal", "consumer", "worker", "ingest", "cmd", "adapters", "sandbox", "emulate"},
		"adapters":   {"journal", "consumer", "worker", "ingest", "cmd", "producer", "sandbox", "emulate"},
		"sandbox":    {"adapters", "journal", "consumer", "worker", "ingest", "cmd", "producer", "operation", "emulate"},
		"emulate":    {"journal", "consumer", "worker", "ingest", "cmd", "producer", "gateway", "console"},
		"consumer":   {"journal", "worker", "ingest", "cmd", "adapters", "sandbox", "producer", "gateway", "emulate"},
		"producer":   {"journal", "worker", "ingest", "cmd", "adapters", "sandbox", "consumer", "emulate"},
		"worker":     {"ingest", "cmd", "sandbox", "producer", "emulate"},
		"ingest":     {"worker", "cmd", "journal", "sandbox", "consumer", "producer", "emulate"},
		"wire":       {""}, // standard library only (checked below)
		// The gateway and its faces reach the daemon through producer and
		// read the journal; they never run a worker or call a target.
		"console": {"worker", "consumer", "ingest", "cmd", "adapters", "sandbox", "producer", "gateway", "emulate"},
		"gateway": {"worker", "consumer", "ingest", "cmd", "adapters", "sandbox", "internal", "emulate"},
		// Processes: the definitions (process) and the coordinator beside
		// the worker (process/coordinator), which sends steps as ordinary
		// commands; never a worker, an adapter or a face.
		// The answer rules: journal and operation only.
		"answer":  {"consumer", "worker", "ingest", "cmd", "adapters", "sandbox", "producer", "gateway", "console", "process", "emulate", "internal"},
		"process": {"worker", "ingest", "cmd", "adapters", "sandbox", "gateway", "console", "emulate"},
	}
	// A layer's *test suites may reach what the layer may not: an adapter's
	// suite runs it against its emulator.
	suiteMay := map[string][]string{"adapters": {"sandbox", "emulate"}}
	// sandbox is the emulators' framework: the standard library only (an
	// emulator package may use more, e.g. google/uuid).
	stdlibOnly := map[string]bool{"operation": true, "redact": true, "journal": true, "sandbox": true,
		"wire": true, "internal/startstop": true, "internal/ctxsleep": true, "internal/crashpoint": true, "adapters/tbank/tbanktoken": true,
		"internal/testkit/childproc": true}
	// The idemgate packages a stdlibOnly package may still import.
	stdlibPlus := map[string]map[string]bool{"operation": {mod + "redact": true}, "journal": {mod + "redact": true, mod + "operation": true},
		"internal/testkit/childproc": {mod + "internal/ctxsleep": true}}
	for _, p := range listPackages(t, "./...") {
		rel := p.rel
		top, _, _ := strings.Cut(rel, "/")
		direct := map[string]bool{}
		for _, imp := range p.imports {
			direct[imp] = true
		}
		for _, imp := range p.deps {
			via := ""
			if !direct[imp] {
				via = " (indirectly)"
			}
			// The trace-context package is what libraries (producer,
			// adapters) import: the OpenTelemetry API only. The SDK and its
			// exporters (gRPC among them) stay in internal/telemetry/otelsetup,
			// which only binaries and tests import.
			if direct[imp] && rel == "internal/telemetry" && (strings.HasPrefix(imp, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(imp, "go.opentelemetry.io/otel/exporters")) {
				t.Errorf("internal/telemetry imports %s: the SDK belongs in internal/telemetry/otelsetup", imp)
			}
			if direct[imp] && strings.HasSuffix(imp, "internal/telemetry/otelsetup") && top != "cmd" {
				t.Errorf("%s imports otelsetup: only binaries set up the SDK", rel)
			}
			if direct[imp] && strings.Contains(imp, "spf13/viper") && top != "cmd" {
				t.Errorf("%s imports viper: configuration is read only in cmd", rel)
			}
			if direct[imp] && top == "ingest" && strings.HasPrefix(imp, mod+"adapters") && imp != mod+"adapters/tbank/tbanktoken" {
				t.Errorf("%s imports %s: of the adapters, ingest uses only T-Bank's token rule (adapters/tbank/tbanktoken)", rel, imp)
			}
			if rel == "process" && (strings.HasPrefix(imp, "github.com/nats-io/") || imp == mod+"consumer" || imp == mod+"producer") {
				t.Errorf("process imports %s%s: the definitions are read by the faces; JetStream is the coordinator's (process/coordinator)", imp, via)
			}
			if direct[imp] && top == "worker" && strings.HasPrefix(imp, "github.com/nats-io/") {
				t.Errorf("%s imports %s: the worker reaches JetStream only through consumer (Router, Delivery, PublishResult)", rel, imp)
			}
			if stdlibOnly[rel] && strings.Contains(strings.Split(imp, "/")[0], ".") && !stdlibPlus[rel][imp] {
				t.Errorf("%s must import only the standard library, imports %s%s", rel, imp, via)
			}
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			impRel := strings.TrimPrefix(imp, mod)
			impTop, _, _ := strings.Cut(impRel, "/")
			for _, f := range forbidden[top] {
				// internal/telemetry (the trace context, OpenTelemetry's API
				// only) may be imported wherever a trace is carried on.
				if f == "" || impTop != f || impRel == "internal/telemetry" || suite(rel) && slices.Contains(suiteMay[top], f) {
					continue
				}
				t.Errorf("%s imports %s%s: dependencies flow cmd → consumer/worker/ingest → journal/adapters → operation", rel, impRel, via)
			}
		}
	}
}

// TestTestMachinery keeps test and soak machinery apart from the daemon,
// both ways. No package a release binary links (go list -deps of
// ./cmd/idemgate, without test files, with or without the soak build tag)
// is test machinery: internal/testkit, a layer's *test suite, e2e or
// scripts. The process machinery of internal/testkit (childproc, natsproc,
// pgproc) depends on no package of the daemon's layers, only on other
// testkit packages; daemontest, the in-process daemon, is the one harness
// that composes those layers (as cmd/idemgate does), and only _test.go
// files import it.
func TestTestMachinery(t *testing.T) {
	all := listPackages(t, "./...")
	imports := map[string][]string{}
	for _, p := range all {
		imports[p.rel] = p.imports
	}
	for _, tags := range []string{"", "soak"} {
		for _, p := range listPackages(t, "-tags", tags, "-deps", "./cmd/idemgate") {
			if p.inModule && testMachinery(p.rel) {
				t.Errorf("cmd/idemgate (tags %q) links test machinery %s: %s", tags, p.rel, strings.Join(importPath(imports, "cmd/idemgate", p.rel), " → "))
			}
		}
	}
	for _, p := range all {
		for _, d := range p.deps {
			if r := strings.TrimPrefix(d, mod); strings.HasPrefix(d, mod) && !testMachinery(p.rel) && testMachinery(r) {
				t.Errorf("%s depends on test machinery %s: %s", p.rel, r, strings.Join(importPath(imports, p.rel, r), " → "))
			}
		}
		for _, imp := range p.imports {
			if imp == mod+"internal/testkit/daemontest" {
				t.Errorf("%s imports internal/testkit/daemontest: only _test.go files may run a daemon in-process", p.rel)
			}
		}
		// daemontest assembles a daemon and rawbaseline does a journal's
		// work by hand: both reach into the daemon's layers on purpose.
		if !strings.HasPrefix(p.rel, "internal/testkit/") || p.rel == "internal/testkit/daemontest" || p.rel == "internal/testkit/rawbaseline" {
			continue
		}
		for _, d := range p.deps {
			// ctxsleep is a standard-library-only leaf, not a layer.
			if strings.HasPrefix(d, mod) && !strings.HasPrefix(d, mod+"internal/testkit/") && d != mod+"internal/ctxsleep" {
				t.Errorf("%s depends on %s: test machinery has no arrow into the daemon's layers", p.rel, strings.TrimPrefix(d, mod))
			}
		}
	}
}

// importPath is a chain of module imports from one package to another
// (relative paths), found breadth first; nil when there is none.
func importPath(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var path []string
			for ; p != ""; p = prev[p] {
				path = append([]string{p}, path...)
			}
			return path
		}
		for _, imp := range imports[p] {
			r := strings.TrimPrefix(imp, mod)
			if _, seen := prev[r]; !seen && strings.HasPrefix(imp, mod) {
				prev[r] = p
				queue = append(queue, r)
			}
		}
	}
	return nil
}

// TestJournalImports keeps the journal's packages to their documented
// imports: journal uses the standard library, redact (an operator's
// evidence is masked before any engine stores it) and operation (the key's
// grammar, spelt once), migrations the standard
// library only, each engine
// uses journal, migrations and journal/internal/sqljournal (what both
// engines share above their drivers) but never the other engine (SQLite
// also internal/ctxsleep, for its busy wait), and the
// conformance suite uses journal only, so that every engine is judged by the
// same code.
func TestJournalImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports ","}}`, "./journal/...", "./migrations/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// The project packages each may import; nil: none.
	allowed := map[string][]string{
		"journal":                     {"redact", "operation"},
		"migrations":                  nil,
		"journal/postgres":            {"journal", "journal/internal/sqljournal", "migrations"},
		"journal/sqlite":              {"journal", "journal/internal/sqljournal", "migrations", "internal/ctxsleep"},
		"journal/internal/sqljournal": {"journal"},
		"journal/journaltest":         {"journal"},
		"journal/postgres/pgtest":     {"journal", "journal/postgres"},
	}
	stdlibOnly := map[string]bool{"journal": true, "migrations": true}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "|")
		rel := strings.TrimPrefix(pkg, mod)
		ok, known := allowed[rel]
		if !known {
			t.Errorf("%s: a new journal package: list its allowed imports here", rel)
			continue
		}
		seen[rel] = true
		for _, imp := range strings.Split(imports, ",") {
			switch {
			case imp == "":
			case strings.HasPrefix(imp, mod):
				if !slices.Contains(ok, strings.TrimPrefix(imp, mod)) {
					t.Errorf("%s imports %s; it may import only %v of this module", rel, strings.TrimPrefix(imp, mod), ok)
				}
			case stdlibOnly[rel] && strings.Contains(strings.Split(imp, "/")[0], "."):
				t.Errorf("%s must import only the standard library, imports %s", rel, imp)
			}
		}
	}
	for rel := range allowed {
		if !seen[rel] {
			t.Errorf("%s is listed but go list did not find it", rel)
		}
	}
}
