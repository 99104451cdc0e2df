// Package natsproc runs a JetStream cluster of nats-server processes on
// loopback for tests that kill a node (kill -9) and start it again on its
// store: the server is built from the nats-server module in go.mod, so the
// version under test is the one the embedded server uses.
//
// It is machinery for tests: nothing outside _test.go files imports it.
package natsproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Build builds nats-server from the module in go.mod into dir and returns
// its path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "nats-server")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build nats-server: %w\n%s", err, out)
	}
	return bin, nil
}

// Node is one nats-server process, restartable on the same ports and store.
type Node struct {
	Name        string
	ClientPort  int
	ClusterPort int
	Store       string
	Log         string
	bin         string
	args        []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Cluster is n nodes routed to one another in cluster "idemgate".
type Cluster struct {
	Name  string
	Nodes []*Node
}

// StartCluster starts n nodes named n1…nN under dir (a store and a log
// each) and waits until every node accepts connections.
func StartCluster(ctx context.Context, bin, dir string, n int) (*Cluster, error) {
	c := &Cluster{Name: "idemgate"}
	for i := range n {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		rp, err := freePort()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, &Node{Name: name, ClientPort: cp, ClusterPort: rp,
			Store: filepath.Join(dir, name), Log: filepath.Join(dir, name+".log"), bin: bin})
	}
	for _, nd := range c.Nodes {
		var routes []string
		for _, o := range c.Nodes {
			if o != nd {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", o.ClusterPort))
			}
		}
		nd.args = []string{"-js", "-sd", nd.Store, "-a", "127.0.0.1", "-p", fmt.Sprint(nd.ClientPort),
			"-n", nd.Name, "--cluster_name", c.Name,
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", nd.ClusterPort),
			"--routes", strings.Join(routes, ",")}
		if err := nd.Start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, nd := range c.Nodes {
		if err := nd.WaitReady(ctx, 30*time.Second); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.waitPlacement(ctx, n, 60*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// waitPlacement waits until the cluster can place a stream of n replicas
// (its meta leader knows every peer): a probe stream is created, then
// deleted.
func (c *Cluster) waitPlacement(ctx context.Context, n int, d time.Duration) error {
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.CreateStream(pctx, jetstream.StreamConfig{Name: "NATSPROC_PROBE", Subjects: []string{"natsproc.probe"},
			Replicas: n, Storage: jetstream.MemoryStorage})
		if err == nil {
			err = js.DeleteStream(pctx, "NATSPROC_PROBE")
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster cannot place %d replicas after %v: %w", n, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// URLs is every node's client URL, comma-separated as nats.url takes it.
func (c *Cluster) URLs() string {
	var urls []string
	for _, nd := range c.Nodes {
		urls = append(urls, nd.URL())
	}
	return strings.Join(urls, ",")
}

// Node returns the node with that server name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, nd := range c.Nodes {
		if nd.Name == name {
			return nd
		}
	}
	return nil
}

// Stop kills every node still running.
func (c *Cluster) Stop() {
	for _, nd := range c.Nodes {
		_ = nd.Kill9()
	}
}

// URL is the node's client URL.
func (nd *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", nd.ClientPort) }

// Start starts the node (again) on its ports and store, appending to its log.
func (nd *Node) Start() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if err := os.MkdirAll(nd.Store, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(nd.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(nd.bin, nd.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", nd.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(exited)
	}()
	nd.cmd, nd.exited = cmd, exited
	return nil
}

// Running reports whether the node's process is alive.
func (nd *Node) Running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.exited:
		return false
	default:
		return true
	}
}

// Kill9 sends SIGKILL (no shutdown, no flush) and waits for the exit.
func (nd *Node) Kill9() error {
	if !nd.Running() {
		return nil
	}
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	nd.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s did not exit after SIGKILL", nd.Name)
	}
}

// WaitReady waits until the node accepts TCP connections.
func (nd *Node) WaitReady(ctx context.Context, d time.Duration) error {
	addr := fmt.Sprintf("127.0.0.1:%d", nd.ClientPort)
	deadline := time.Now().Add(d)
	for {
		conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		if !nd.Running() {
			return fmt.Errorf("%s exited before accepting connections (log %s)", nd.Name, nd.Log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not accept connections in %v: %w", nd.Name, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
