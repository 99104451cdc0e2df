package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// binary is the idemgate executable built once for the whole test binary.
var binary string

// TestMain builds cmd/idemgate with -race (reusing the race-compiled package
// cache `go test -race` has just filled) so that every daemon subprocess is
// race-checked too.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here runs daemons; -short skips them without a build.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "idemgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "idemgate")
	start := time.Now()
	build := exec.Command("go", "build", "-race", "-o", binary, "github.com/idemgate/idemgate/cmd/idemgate")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build -race ./cmd/idemgate:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "e2e: built %s in %v\n", binary, time.Since(start).Round(time.Millisecond))
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// skipShort skips a daemon test in -short mode.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: runs idemgate daemons; skipped with -short")
	}
}
