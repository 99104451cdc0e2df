package childproc

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRestartCountsOnlyUnaskedExits: a process killed by the caller is not
// an unexpected exit, one that ends by itself is; both incarnations append
// to one log.
func TestRestartCountsOnlyUnaskedExits(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	p := &Process{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", `echo "run $N"; exec sleep 30`}, Env: []string{"N=1"}, Log: log}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if !p.Running() {
		t.Fatal("not running after Start")
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if b, _ := os.ReadFile(log); string(b) == "run 1\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first incarnation wrote nothing to its log")
		}
		time.Sleep(10 * time.Millisecond) // polling the log file: no signal to wait on
	}
	if err := p.Signal(syscall.SIGSTOP, false); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill9(); err != nil { // a stopped process dies too
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("running after Kill9")
	}
	if starts, unexpected, _ := p.Stats(); starts != 1 || unexpected != 0 {
		t.Fatalf("after Kill9: starts %d, unexpected %d; want 1, 0", starts, unexpected)
	}

	p.Args = []string{"-c", `echo "run $N"; exit 3`}
	if err := p.Start("N=2"); err != nil {
		t.Fatal(err)
	}
	if !p.Wait(10 * time.Second) {
		t.Fatal("the second incarnation did not exit")
	}
	starts, unexpected, last := p.Stats()
	if starts != 2 || unexpected != 1 || !strings.Contains(last, "exit status 3") {
		t.Fatalf("after an exit of its own: starts %d, unexpected %d, last %q; want 2, 1, exit status 3", starts, unexpected, last)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "run 1\nrun 2\n" {
		t.Fatalf("log %q, want both incarnations appended", got)
	}
}

// TestWaitTCP: WaitTCP returns once something listens and times out when
// nothing does; the process's WaitTCP gives up at once when the process is
// gone.
func TestWaitTCP(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx := context.Background()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := WaitTCP(ctx, addr, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := WaitTCP(ctx, addr, 300*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitTCP on a closed port: %v, want ErrTimeout", err)
	}

	p := &Process{Name: "true", Bin: "/bin/true", Log: filepath.Join(t.TempDir(), "true.log")}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Wait(10 * time.Second)
	began := time.Now()
	err = p.WaitTCP(ctx, addr, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before accepting connections") {
		t.Fatalf("WaitTCP on an exited process: %v", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("WaitTCP waited %v for an exited process", d)
	}
}
