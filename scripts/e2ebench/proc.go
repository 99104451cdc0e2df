// Helpers on processes and URLs.

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// withParam adds name=value to a postgres:// URL's query.
func withParam(url, name, value string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + name + "=" + value
}

// procCPU is a process's user+system CPU time from /proc/<pid>/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// procRSS is a process's resident set size in bytes.
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// cpuShares are CPU times by process kind, read together.
type cpuShares struct {
	daemon, postgres, nats, bench time.Duration
}

// cpuNow reads the CPU of the daemon (pid 0: none), every postgres process
// on this machine (the journal's server: its backends, WAL writer and
// checkpointer), the nats-server and this process (the emulator, and the
// baseline loops when they run).
func (b *bench) cpuNow(daemon int) cpuShares {
	s := cpuShares{nats: procCPU(b.nats.Process.Pid), bench: procCPU(os.Getpid())}
	if daemon > 0 {
		s.daemon = procCPU(daemon)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) == "postgres" {
			s.postgres += procCPU(pid)
		}
	}
	return s
}

func (s cpuShares) sub(o cpuShares) cpuShares {
	return cpuShares{s.daemon - o.daemon, s.postgres - o.postgres, s.nats - o.nats, s.bench - o.bench}
}

// perCommand prints the shares as CPU milliseconds per command.
func (s cpuShares) perCommand(n int) string {
	per := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond)/float64(n), 'f', 3, 64)
	}
	total := s.daemon + s.postgres + s.nats + s.bench
	return fmt.Sprintf("daemon %s, PostgreSQL %s, NATS %s, e2ebench %s; total %s", per(s.daemon), per(s.postgres), per(s.nats), per(s.bench), per(total))
}
