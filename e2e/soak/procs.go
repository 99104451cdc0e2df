package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process the soak owns, restartable on the same files.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string // output file, appended across incarnations

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool // SIGSTOP in force
	starts  int
	// unexpected counts exits the soak did not cause.
	unexpected int
	expectExit bool
	lastExit   string
}

func (p *proc) start(extraEnv ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(append([]string{}, p.env...), extraEnv...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.exited, p.stopped, p.expectExit = cmd, make(chan struct{}), false, false
	p.starts++
	exited := p.exited
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

func (p *proc) running() bool {
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

// signal sends sig to the running process (not its group: replicas have no
// children).
func (p *proc) signal(sig syscall.Signal, expectExit bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return errors.New(p.name + ": not started")
	}
	if expectExit {
		p.expectExit = true
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return p.cmd.Process.Signal(sig)
}

// wait waits for the process to exit, up to d.
func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// expect marks the next exit as caused by the soak (a crash point).
func (p *proc) expect() {
	p.mu.Lock()
	p.expectExit = true
	p.mu.Unlock()
}

// kill9 SIGKILLs the process (after SIGCONT if it was stopped) and waits.
func (p *proc) kill9() {
	if !p.running() {
		return
	}
	_ = p.signal(syscall.SIGKILL, true)
	p.wait(30 * time.Second)
}

// term asks the process to stop, then kills it after grace.
func (p *proc) term(grace time.Duration) {
	if !p.running() {
		return
	}
	_ = p.signal(syscall.SIGCONT, false)
	_ = p.signal(syscall.SIGTERM, true)
	if !p.wait(grace) {
		p.kill9()
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitTCP(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer in %v: %w", addr, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// postgres is a throwaway cluster the nemesis may stop and start (the
// machine's own server is never touched).
type postgres struct {
	bin, dir string
	port     int
	runAs    []string // runuser -u postgres -- when root
	logf     string
}

func findPGBin() (string, error) {
	if d := os.Getenv("SOAK_PG_BIN"); d != "" {
		return d, nil
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(ms) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errors.New("no initdb found (install PostgreSQL, or set SOAK_PG_BIN)")
	}
	sort.Slice(ms, func(i, j int) bool { return pgVersion(ms[i]) < pgVersion(ms[j]) })
	return filepath.Dir(ms[len(ms)-1]), nil
}

func pgVersion(p string) int {
	m := regexp.MustCompile(`postgresql/(\d+)/`).FindStringSubmatch(p)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func newPostgres(dir string) (*postgres, error) {
	bin, err := findPGBin()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pg := &postgres{bin: bin, dir: dir, port: port, logf: filepath.Join(dir, "postgres.log")}
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
		pg.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := pg.run("initdb", "-D", pg.data(), "-U", "postgres", "-A", "trust"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := pg.start(); err != nil {
		return nil, err
	}
	if out, err := pg.run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "soak"); err != nil {
		return nil, fmt.Errorf("createdb: %w\n%s", err, out)
	}
	return pg, nil
}

func (pg *postgres) data() string { return filepath.Join(pg.dir, "data") }

func (pg *postgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/soak?sslmode=disable", pg.port)
}

func (pg *postgres) run(tool string, args ...string) (string, error) {
	argv := append(append(append([]string{}, pg.runAs...), filepath.Join(pg.bin, tool)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = pg.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (pg *postgres) start() error {
	out, err := pg.run("pg_ctl", "-D", pg.data(), "-l", pg.logf, "-w", "-t", "60", "-o",
		fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=on -c max_connections=200", pg.port, pg.dir), "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

// stop stops the server at once (mode immediate: like a crash; recovery on
// the next start).
func (pg *postgres) stop() error {
	out, err := pg.run("pg_ctl", "-D", pg.data(), "-m", "immediate", "-w", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

func (pg *postgres) shutdown() {
	_, _ = pg.run("pg_ctl", "-D", pg.data(), "-m", "fast", "-w", "stop")
}

// sandboxInfo is what `idemgate sandbox` printed: each emulator's admin base
// URL, and the adapters block for the daemons' configuration.
type sandboxInfo struct {
	urls     map[string]string
	adapters string // the YAML lines under "adapters:", indented two spaces
	secrets  []string
}

var emulatorLine = regexp.MustCompile(`^([a-z0-9]+)  (http://127\.0\.0\.1:\d+)$`)
var credLine = regexp.MustCompile(`\s(\w+)=(\S+)`)

// readSandbox parses the sandbox's banner from r until "Serving".
func readSandbox(r io.Reader) (sandboxInfo, error) {
	info := sandboxInfo{urls: map[string]string{}}
	sc := bufio.NewScanner(r)
	inAdapters := false
	var b strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if m := emulatorLine.FindStringSubmatch(line); m != nil {
			info.urls[m[1]] = m[2]
		}
		if strings.Contains(line, "test credentials") {
			for _, m := range credLine.FindAllStringSubmatch(line, -1) {
				if m[1] != "user_id" && m[1] != "key_field_id" && m[1] != "user" && m[1] != "shop_id" && m[1] != "terminal_key" {
					info.secrets = append(info.secrets, m[2])
				}
			}
		}
		switch {
		case line == "adapters:":
			inAdapters = true
		case strings.HasPrefix(line, "Serving"):
			info.adapters = b.String()
			if len(info.urls) == 0 || info.adapters == "" {
				return info, errors.New("sandbox banner without emulators or adapters block")
			}
			return info, nil
		case inAdapters && strings.HasPrefix(line, "  "):
			b.WriteString(line + "\n")
		}
	}
	return info, fmt.Errorf("sandbox ended before serving: %v", sc.Err())
}
