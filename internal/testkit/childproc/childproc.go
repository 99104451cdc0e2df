// Package childproc runs child processes that tests and the fault soak kill,
// stop, continue and start again on the same files: each incarnation in a
// process group of its own, its output appended to one log, and the exits
// the caller did not cause counted. natsproc builds its nats-server nodes on
// it and e2e/soak its idemgate replicas; FreePort and WaitTCP give a child a
// loopback port and wait until it listens there; RefusingAddr gives a test
// an address where nothing can listen.
//
// It is machinery for tests and the soak: it imports the standard library
// only, and no daemon code imports it.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is one child process, restartable on the same log.
type Process struct {
	Name string
	Bin  string
	Args []string
	// Env is the environment of every start, before Start's extra
	// variables; nil with no extra variables inherits this process's.
	Env []string
	// Log is the output file, appended to across incarnations.
	Log string

	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{}
	starts     int
	unexpected int // exits nobody asked for (Signal with expectExit, Expect, Kill9, Term)
	expectExit bool
	lastExit   string
}

// Start starts the process (again), with extraEnv after Env.
func (p *Process) Start(extraEnv ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Bin, p.Args...)
	if p.Env != nil || len(extraEnv) > 0 {
		cmd.Env = append(append([]string{}, p.Env...), extraEnv...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.expectExit = cmd, exited, false
	p.starts++
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		if !p.expectExit {
			p.unexpected++
		}
		p.lastExit = fmt.Sprint(err)
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// Running reports whether the process is alive (stopped counts as alive).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process (not its group); expectExit marks the exit
// it may cause as the caller's.
func (p *Process) Signal(sig syscall.Signal, expectExit bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return errors.New(p.Name + ": not started")
	}
	if expectExit {
		p.expectExit = true
	}
	return p.cmd.Process.Signal(sig)
}

// Wait waits up to d for the process to exit; true when it has (or never
// started).
func (p *Process) Wait(d time.Duration) bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// Expect marks the next exit as the caller's (e.g. a crash point it set).
func (p *Process) Expect() {
	p.mu.Lock()
	p.expectExit = true
	p.mu.Unlock()
}

// Kill9 sends SIGKILL (no shutdown, no flush; a stopped process dies too)
// and waits for the exit.
func (p *Process) Kill9() error {
	if !p.Running() {
		return nil
	}
	if err := p.Signal(syscall.SIGKILL, true); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if !p.Wait(30 * time.Second) {
		return fmt.Errorf("%s did not exit after SIGKILL", p.Name)
	}
	return nil
}

// Term asks the process to stop (SIGCONT then SIGTERM) and kills it after
// grace.
func (p *Process) Term(grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = p.Signal(syscall.SIGCONT, false)
	_ = p.Signal(syscall.SIGTERM, true)
	if !p.Wait(grace) {
		_ = p.Kill9()
	}
}

// Stats reports how many times the process was started, how many of its
// exits nobody asked for, and how the last one ended.
func (p *Process) Stats() (starts, unexpected int, lastExit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts, p.unexpected, p.lastExit
}

// WaitTCP waits up to d until addr accepts connections; it fails at once
// when the process exits first.
func (p *Process) WaitTCP(ctx context.Context, addr string, d time.Duration) error {
	return waitTCP(ctx, addr, d, func() error {
		if !p.Running() {
			return fmt.Errorf("%s exited before accepting connections (log %s)", p.Name, p.Log)
		}
		return nil
	})
}

// WaitTCP waits up to d until addr accepts connections.
func WaitTCP(ctx context.Context, addr string, d time.Duration) error {
	return waitTCP(ctx, addr, d, func() error { return nil })
}

func waitTCP(ctx context.Context, addr string, d time.Duration, alive func() error) error {
	err := Poll(ctx, d, 50*time.Millisecond, func() (bool, error) {
		conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			conn.Close()
			return true, nil
		}
		if aerr := alive(); aerr != nil {
			return true, aerr
		}
		return false, err
	})
	if errors.Is(err, ErrTimeout) {
		return fmt.Errorf("%s did not accept connections: %w", addr, err)
	}
	return err
}

// ErrTimeout is Poll's error when its time ran out.
var ErrTimeout = errors.New("timed out")

// Poll calls try every interval until try reports done (try's error is then
// Poll's), ctx ends, or d passes (ErrTimeout, with try's last error).
func Poll(ctx context.Context, d, interval time.Duration, try func() (done bool, err error)) error {
	deadline := time.Now().Add(d)
	for {
		done, err := try()
		if done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v: %w", ErrTimeout, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
