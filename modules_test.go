package idemgate_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// majorSuffix is a module path's major version: /vN, or gopkg.in's .vN.
var majorSuffix = regexp.MustCompile(`(/v[0-9]+|\.v[0-9]+)$`)

// requiredModules lists the module paths a go.mod requires (direct and
// indirect: since Go 1.17 go.mod names every module the build takes
// packages from).
func requiredModules(gomod string) []string {
	var mods []string
	block := false
	for _, line := range strings.Split(gomod, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case line == "require (":
			block = true
			continue
		case block && line == ")":
			block = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimSpace(strings.TrimPrefix(line, "require "))
		case !block:
			continue
		}
		if f := strings.Fields(line); len(f) == 2 {
			mods = append(mods, f[0])
		}
	}
	return mods
}

// directModules lists the module paths go.mod requires directly (the
// lines without "// indirect").
func directModules(gomod string) []string {
	var direct []string
	for _, line := range strings.Split(gomod, "\n") {
		if strings.Contains(line, "// indirect") {
			continue
		}
		direct = append(direct, line)
	}
	return requiredModules(strings.Join(direct, "\n"))
}

// twoMajors returns, for each module linked at more than one major version,
// those versions' paths.
func twoMajors(mods []string) map[string][]string {
	by := map[string][]string{}
	for _, m := range mods {
		base := majorSuffix.ReplaceAllString(m, "")
		by[base] = append(by[base], m)
	}
	out := map[string][]string{}
	for base, ms := range by {
		if len(ms) > 1 {
			slices.Sort(ms)
			out[base] = ms
		}
	}
	return out
}

// TestOneMajorVersionPerModule: what idemgate builds (every non-test
// package, read with go list -deps) links one major version of each module,
// and go.mod's direct requirements name one (two, such as backoff v4 and v5,
// are two APIs and two sets of defaults for one job). A test-only tool's
// own dependencies (kin-openapi's YAML v4 beside viper's v3) are not linked
// into the binary and are left alone.
func TestOneMajorVersionPerModule(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	all := requiredModules(string(b))
	if !slices.Contains(all, "github.com/jackc/pgx/v5") || !slices.Contains(all, "golang.org/x/sys") {
		t.Fatalf("go.mod's requirements not read: %v", all)
	}
	for base, ms := range twoMajors(directModules(string(b))) {
		t.Errorf("go.mod requires %s at %d major versions: %s; keep one", base, len(ms), strings.Join(ms, ", "))
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	linked := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		linked[m] = true
	}
	if !linked["github.com/jackc/pgx/v5"] {
		t.Fatalf("go list -deps did not list the build's modules: %s", out)
	}
	var mods []string
	for m := range linked {
		mods = append(mods, m)
	}
	for base, ms := range twoMajors(mods) {
		t.Errorf("the build links %s at %d major versions: %s; keep one", base, len(ms), strings.Join(ms, ", "))
	}
	// The check itself: two majors of one module are caught, one is not.
	probe := requiredModules("module x\n\nrequire (\n\tgithub.com/cenkalti/backoff/v4 v4.3.0\n\tgithub.com/cenkalti/backoff/v5 v5.0.3 // indirect\n)\n\nrequire gopkg.in/yaml.v2 v2.4.0\nrequire gopkg.in/yaml.v3 v3.0.1\n")
	got := twoMajors(probe)
	if len(got) != 2 || len(got["github.com/cenkalti/backoff"]) != 2 || len(got["gopkg.in/yaml"]) != 2 {
		t.Errorf("two majors of one module not caught: %v", got)
	}
}
