//go:build soak

package crashpoint

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Enabled reports whether this build reads the soak switches (-tags soak).
const Enabled = true

// Environment variables read by soak builds.
const (
	EnvCrash = "IDEMGATE_SOAK_CRASH"
	EnvBreak = "IDEMGATE_SOAK_BREAK"
)

var (
	crashAt    Point
	crashAfter int64
	passes     atomic.Int64
	breakName  Break
)

func init() {
	if v := os.Getenv(EnvCrash); v != "" {
		p, n, _ := strings.Cut(v, ":")
		crashAt, crashAfter = Point(p), 1
		if n != "" {
			if k, err := strconv.ParseInt(n, 10, 64); err == nil && k > 0 {
				crashAfter = k
			}
		}
		if !slices.Contains(Points, crashAt) && !slices.Contains(ProcessPoints, crashAt) {
			fmt.Fprintf(os.Stderr, "%s=%q: unknown crash point\n", EnvCrash, v)
			os.Exit(78)
		}
	}
	if v := os.Getenv(EnvBreak); v != "" {
		breakName = Break(v)
		if !slices.Contains(Breaks, breakName) {
			fmt.Fprintf(os.Stderr, "%s=%q: unknown break\n", EnvBreak, v)
			os.Exit(78)
		}
	}
}

func hit(p Point) {
	if p != crashAt || crashAt == "" {
		return
	}
	if passes.Add(1) == crashAfter {
		// The soak reads this line to tell a crash point from a crash.
		fmt.Fprintf(os.Stderr, "{\"msg\":\"soak crash point\",\"point\":%q}\n", string(p))
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL cannot be caught: nothing runs after it
	}
}

func broken(b Break) bool { return breakName != "" && b == breakName }
