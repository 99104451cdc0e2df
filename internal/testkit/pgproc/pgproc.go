// Package pgproc runs throwaway PostgreSQL servers on loopback for tests
// that stop a server abruptly, stream WAL to a standby and promote it: the
// machine's own PostgreSQL binaries (/usr/lib/postgresql/*/bin), run as the
// postgres user when the test runs as root, as scripts/test does (in a
// folder of their own under /tmp when the one asked for is out of that
// user's reach, e.g. under a root-only TMPDIR; Remove cleans up). The fault
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
	// asked is the folder the server was made for when it runs in one of
	// its own instead (Dir), out of reach of the postgres user; asked is
	// then a symbolic link to Dir.
	asked string
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
		if !s.reaches(dir) {
			if err := s.relocate(uid, gid); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// reaches reports whether the postgres user can enter and write dir: it
// cannot when a folder above it is closed to others, such as a root-only
// TMPDIR.
func (s *Server) reaches(dir string) bool {
	argv := append(append([]string{}, s.runAs...), "test", "-x", dir, "-a", "-w", dir)
	return exec.Command(argv[0], argv[1:]...).Run() == nil
}

// relocate moves the server out of a folder the postgres user cannot
// reach into a new one of its own under /tmp (or /var/tmp), owned by
// postgres, and leaves a symbolic link to it where it was asked for.
// Remove takes the folder away again, the log kept where it was asked for.
func (s *Server) relocate(uid, gid int) error {
	asked := s.Dir
	for _, base := range []string{"/tmp", "/var/tmp"} {
		d, err := os.MkdirTemp(base, "idemgate-pgproc-")
		if err != nil {
			continue
		}
		if err := os.Chown(d, uid, gid); err != nil || !s.reaches(d) {
			_ = os.RemoveAll(d)
			continue
		}
		if err := os.Remove(asked); err != nil {
			_ = os.RemoveAll(d)
			return fmt.Errorf("%s is out of the postgres user's reach and cannot give way to a folder it can reach: %w", asked, err)
		}
		if err := os.Symlink(d, asked); err != nil {
			_ = os.RemoveAll(d)
			return err
		}
		s.asked, s.Dir = asked, d
		return nil
	}
	return fmt.Errorf("PostgreSQL runs as the postgres user, who cannot enter %s (a folder above it is closed to others, "+
		"e.g. a root-only TMPDIR), nor a new folder under /tmp or /var/tmp", asked)
}

// Remove stops the server if it runs and removes its data directory. Its
// log stays in the folder the server was made for: when the server ran in
// a folder of its own (out of the postgres user's reach, see relocate),
// the log moves back there and that folder goes.
func (s *Server) Remove() error {
	s.Shutdown()
	if err := os.RemoveAll(s.Data()); err != nil {
		return err
	}
	if s.asked == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Dir(s.asked)); err == nil {
		if err := os.Remove(s.asked); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.MkdirAll(s.asked, 0o755); err != nil {
			return err
		}
		if b, err := os.ReadFile(s.Log()); err == nil {
			if err := os.WriteFile(filepath.Join(s.asked, filepath.Base(s.Log())), b, 0o644); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(s.Dir)
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
		return nil, s.failed(fmt.Errorf("initdb: %w\n%s", err, out))
	}
	if err := s.Start(); err != nil {
		return nil, s.failed(err)
	}
	if out, err := s.Run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", db); err != nil {
		return nil, s.failed(fmt.Errorf("createdb: %w\n%s", err, out))
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
		return nil, s.failed(fmt.Errorf("pg_basebackup: %w\n%s", err, out))
	}
	if err := s.Start(); err != nil {
		return nil, s.failed(err)
	}
	return s, nil
}

// failed is err, once a server that never came up is stopped and a
// folder of its own removed (the caller gets no Server to Remove).
func (s *Server) failed(err error) error {
	if s.asked != "" {
		_ = s.Remove()
	}
	return err
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
