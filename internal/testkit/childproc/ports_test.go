package childproc

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestFreePortOutsideEphemeralRange: where the kernel's ephemeral range
// leaves room below it, FreePort draws from there, so a bind to port 0
// elsewhere cannot take the port before the caller binds it; the port is
// free to bind.
func TestFreePortOutsideEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	if lo-freePortMin < 1000 {
		t.Skipf("ephemeral range starts at %d: no room below it", lo)
	}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < freePortMin || p >= lo {
			t.Fatalf("FreePort = %d, want in [%d, %d)", p, freePortMin, lo)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("FreePort = %d, not free: %v", p, err)
		}
		l.Close()
	}
}

// TestFreePortReservedAcrossProcesses: a port FreePort handed out in one
// process is not handed out in another (a parallel test package, a soak
// beside the tests) while the first lives, even once nothing listens there.
func TestFreePortReservedAcrossProcesses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the reservation across processes uses Linux's abstract unix sockets")
	}
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReserve$")
	cmd.Env = append(os.Environ(), reserveHelperEnv+"="+strconv.Itoa(p))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if got := string(out); !strings.HasPrefix(got, "taken\n") {
		t.Fatalf("another process could reserve port %d, which this one holds: %q", p, got)
	}
	again, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if again == p {
		t.Fatalf("FreePort handed out %d twice", p)
	}
}

const reserveHelperEnv = "CHILDPROC_TEST_RESERVE"

// TestHelperReserve is the other process of
// TestFreePortReservedAcrossProcesses: it says whether it could reserve the
// port it is given.
func TestHelperReserve(t *testing.T) {
	v := os.Getenv(reserveHelperEnv)
	if v == "" {
		return // run as the other process only
	}
	p, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	if reserve(p) {
		os.Stdout.WriteString("reserved\n")
	} else {
		os.Stdout.WriteString("taken\n")
	}
}

// TestRefusingAddr: a connection to RefusingAddr is refused, and no server
// can listen there until it is released.
func TestRefusingAddr(t *testing.T) {
	addr, release, err := RefusingAddr()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a server could listen on %s", addr)
	}
}
