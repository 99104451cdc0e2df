// Package pgproc runs throwaway PostgreSQL servers on loopback for tests
// that stop a server abruptly, stream WAL to a standby and promote it: the
// machine's own PostgreSQL binaries (/usr/lib/postgresql/*/bin), run as the
// postgres user when the test runs as root, as scripts/test does. The fault
// soak (e2e/soak) runs its database, which its nemesis stops like a crash,
// with InitPrimary too.
//
// It imports internal/testkit/childproc and the standard library, nothing
// of the daemon. It is machinery for tests and the soak: no daemon code
// imports it (deps_test.go).
package pgproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/internal/testkit/childproc"
)

// BinDir finds the newest PostgreSQL server binaries (PGPROC_BIN overrides).
func BinDir() (string, error) {
	if d := os.Getenv("PGPROC_BIN"); d != "" {
		return d, nil
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(ms) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errors.New("no initdb found: install PostgreSQL (scripts/test installs Debian's package when root)")
	}
	sort.Slice(ms, func(i, j int) bool { return version(ms[i]) < version(ms[j]) })
	return filepath.Dir(ms[len(ms)-1]), nil
}

func version(p string) int {
	m := regexp.MustCompile(`postgresql/(\d+)/`).FindStringSubmatch(p)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Server is one PostgreSQL data directory and the port it serves on.
type Server struct {
	Bin  string
	Dir  string // holds data/, the log and the socket
	Port int
	// Settings are extra -c name=value options at every start.
	Settings []string
	runAs    []string
}

// Data is the data directory.
func (s *Server) Data() string { return filepath.Join(s.Dir, "data") }

// Log is the server's log file.
func (s *Server) Log() string { return filepath.Join(s.Dir, "postgres.log") }

// Addr is host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// URL is a connection URL for database db.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

func newServer(dir string) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	port, err := childproc.FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Bin: bin, Dir: dir, Port: port}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user to run PostgreSQL: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		s.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	return s, nil
}

// InitPrimary creates a cluster under dir (trust authentication on
// loopback, replication connections allowed), starts it and creates db.
func InitPrimary(dir, db string, settings ...string) (*Server, error) {
	s, err := newServer(dir)
	if err != nil {
		return nil, err
	}
	s.Settings = settings
	if out, err := s.Run("initdb", "-D", s.Data(), "-U", "postgres", "-A", "trust"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	if out, err := s.Run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", db); err != nil {
		return nil, fmt.Errorf("createdb: %w\n%s", err, out)
	}
	return s, nil
}

// Standby takes a base backup of primary into dir with pg_basebackup -R
// (streaming replication configured, standby.signal written) and starts it
// as a hot standby on a port of its own.
func Standby(primary *Server, dir string) (*Server, error) {
	s, err := newServer(dir)
	if err != nil {
		return nil, err
	}
	s.Settings = primary.Settings
	if out, err := s.Run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", s.Data(), "-R", "-X", "stream", "-c", "fast"); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Run runs a PostgreSQL tool from Bin (as postgres when root).
func (s *Server) Run(tool string, args ...string) (string, error) {
	argv := append(append(append([]string{}, s.runAs...), filepath.Join(s.Bin, tool)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.Dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Start starts the server and waits until it accepts connections.
func (s *Server) Start() error {
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=on -c max_connections=200", s.Port, s.Dir)
	for _, kv := range s.Settings {
		opts += " -c " + kv
	}
	out, err := s.Run("pg_ctl", "-D", s.Data(), "-l", s.Log(), "-w", "-t", "60", "-o", opts, "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, s.tailLog())
	}
	return nil
}

// StopImmediate stops the server like a crash (pg_ctl -m immediate): no
// checkpoint, connections cut; WAL not yet sent to a standby stays behind.
func (s *Server) StopImmediate() error {
	out, err := s.Run("pg_ctl", "-D", s.Data(), "-m", "immediate", "-w", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// Promote turns a standby into a primary and waits until it accepts writes.
func (s *Server) Promote() error {
	out, err := s.Run("pg_ctl", "-D", s.Data(), "-w", "-t", "60", "promote")
	if err != nil {
		return fmt.Errorf("pg_ctl promote: %w\n%s", err, out)
	}
	return nil
}

// Shutdown stops the server if it runs (fast mode) and ignores errors.
func (s *Server) Shutdown() {
	_, _ = s.Run("pg_ctl", "-D", s.Data(), "-m", "fast", "-w", "stop")
}

func (s *Server) tailLog() string {
	b, err := os.ReadFile(s.Log())
	if err != nil {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
