// The daemon's runs: `idemgate run` against the emulator, timed and measured
// from /proc.

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// daemonRun runs `idemgate run` against a fresh stage; lostRate > 0 loses
// that share of the emulator's answers after the payment is made.
func (b *bench) daemonRun(n, intents int, lostRate float64) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	st, err := b.freshStage(ctx, "daemon", n, intents, lostRate)
	if err != nil {
		return result{}, err
	}
	url, cons := st.url, st.cons
	cfgPath, err := b.writeDaemonConfig(url, "", "")
	if err != nil {
		return result{}, err
	}
	var logs bytes.Buffer
	cmd := exec.Command(b.cfg.bin, "run", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if b.cfg.profileDir != "" {
		dir := filepath.Join(b.cfg.profileDir, "main")
		if lostRate > 0 {
			dir = filepath.Join(b.cfg.profileDir, "lost")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return result{}, err
		}
		cmd.Env = append(os.Environ(), "IDEMGATE_PROFILE_DIR="+dir)
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	pid := cmd.Process.Pid
	var cpu0 time.Duration
	var peak atomic.Int64
	sampling := make(chan struct{})
	go func() { // peak RSS
		for {
			if rss := procRSS(pid); rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-sampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	settled := func() (bool, error) {
		if lostRate == 0 {
			return true, nil
		}
		// Lost answers settle by lookup: every intent must end succeeded.
		return b.allSucceeded(ctx, url, intents)
	}
	var shares0 cpuShares
	elapsed, err := b.watch(ctx, cons, n, func() { cpu0, shares0 = procCPU(pid), b.cpuNow(pid) }, settled)
	cpu := procCPU(pid) - cpu0
	shares := b.cpuNow(pid).sub(shares0)
	var replay time.Duration
	if err == nil && lostRate == 0 && b.cfg.replays > 0 {
		// Every intent again under new event ids, the daemon running: all
		// replays from the journal, no call.
		again := make([]int, b.cfg.replays)
		for p := range again {
			again[p] = p % intents
		}
		pubErr := make(chan error, 1)
		started := make(chan struct{})
		go func() { <-started; pubErr <- b.publish(ctx, "replay", again) }()
		replay, err = b.watch(ctx, cons, n+len(again), nil, nil, started)
		if perr := <-pubErr; err == nil {
			err = perr
		}
	}
	close(sampling)
	stop()
	if err != nil {
		return result{}, fmt.Errorf("%w\ndaemon log (tail):\n%s", err, tail(logs.String(), 30))
	}
	r := result{commands: n, elapsed: elapsed, cpu: cpu, shares: shares, peakRSS: peak.Load(), replays: b.cfg.replays, replayed: replay}
	if got := b.sb.TotalEffects(); got != intents {
		r.duplicates = got - intents
	}
	return r, nil
}

func (b *bench) allSucceeded(ctx context.Context, url string, intents int) (bool, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var done int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM agent_operation_log WHERE status = 'succeeded'`).Scan(&done)
	return done == intents, err
}
