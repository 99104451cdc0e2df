package idemgate_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

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
//
// The layer rules (forbidden, stdlibOnly) hold for every package a package
// depends on, directly or not (go list's Deps): a layer cannot reach a
// forbidden one through a third package. The rules about what a package
// itself imports (viper, nats.go in the worker, the SDK) read its own
// imports.
func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports ","}}|{{join .Deps ","}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/idemgate/idemgate/"
	// For each package prefix: the project packages it must not import.
	forbidden := map[string][]string{
		"operation":  {""}, // standard library and redact only (checked below)
		"redact":     {""}, // standard library only (checked below)
		"journal":    {"consumer", "worker", "ingest", "cmd", "adapters", "sandbox", "producer"},
		"migrations": {"journal", "consumer", "worker", "ingest", "cmd", "adapters", "sandbox"},
		"adapters":   {"journal", "consumer", "worker", "ingest", "cmd", "producer"},
		"sandbox":    {"adapters", "journal", "consumer", "worker", "ingest", "cmd", "producer", "operation"},
		"consumer":   {"journal", "worker", "ingest", "cmd", "adapters", "sandbox", "producer", "gateway"},
		"producer":   {"journal", "worker", "ingest", "cmd", "adapters", "sandbox", "consumer"},
		"worker":     {"ingest", "cmd", "sandbox", "producer"},
		"ingest":     {"worker", "cmd", "journal", "sandbox", "consumer", "producer"},
		"wire":       {""}, // standard library only (checked below)
		// The gateway and its faces reach the daemon through producer and
		// read the journal; they never run a worker or call a target.
		"console": {"worker", "consumer", "ingest", "cmd", "adapters", "sandbox", "producer", "gateway"},
		"gateway": {"worker", "consumer", "ingest", "cmd", "adapters", "sandbox", "internal"},
	}
	// sandbox is the emulators' framework: the standard library only (an
	// emulator package may use more, e.g. google/uuid).
	stdlibOnly := map[string]bool{"operation": true, "redact": true, "journal": true, "sandbox": true,
		"wire": true, "internal/startstop": true, "internal/ctxsleep": true, "internal/crashpoint": true, "adapters/tbank/tbanktoken": true}
	// The idemgate packages a stdlibOnly package may still import.
	stdlibPlus := map[string]map[string]bool{"operation": {mod + "redact": true}, "journal": {mod + "redact": true, mod + "operation": true}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, rest, _ := strings.Cut(line, "|")
		imports, deps, _ := strings.Cut(rest, "|")
		rel := strings.TrimPrefix(pkg, mod)
		top, _, _ := strings.Cut(rel, "/")
		direct := map[string]bool{}
		for _, imp := range strings.Split(imports, ",") {
			direct[imp] = true
		}
		for _, imp := range strings.Split(deps, ",") {
			if imp == "" {
				continue
			}
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
				if f != "" && impTop == f && impRel != "internal/telemetry" {
					t.Errorf("%s imports %s%s: dependencies flow cmd → consumer/worker/ingest → journal/adapters → operation", rel, impRel, via)
				}
			}
		}
	}
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
	const mod = "github.com/idemgate/idemgate/"
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
