// Package natsproc runs a JetStream cluster of nats-server processes on
// loopback for tests that kill a node (kill -9) and start it again on its
// store: the server is built from the nats-server module in go.mod, so the
// version under test is the one the embedded server uses.
//
// NewServer gives the fault soak (e2e/soak) its standalone server on the
// same terms.
//
// It imports internal/testkit/childproc, nats.go and the standard library,
// nothing of the daemon. It is machinery for tests and the soak: no daemon
// code imports it (deps_test.go).
package natsproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/internal/testkit/childproc"
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

// Node is one nats-server process, restartable on the same ports and store
// (Kill9, Running, Term and Signal come from childproc.Process).
type Node struct {
	childproc.Process
	ClientPort  int
	ClusterPort int // 0 for a standalone server
	Store       string
}

// NewServer prepares a standalone JetStream server (not started) on a free
// loopback port, with its store and its log at the paths given.
func NewServer(bin, name, store, log string) (*Node, error) {
	cp, err := childproc.FreePort()
	if err != nil {
		return nil, err
	}
	nd := &Node{ClientPort: cp, Store: store}
	nd.Process = childproc.Process{Name: name, Bin: bin, Log: log, Args: nd.serverArgs()}
	return nd, nil
}

func (nd *Node) serverArgs() []string {
	return []string{"-js", "-sd", nd.Store, "-a", "127.0.0.1", "-p", fmt.Sprint(nd.ClientPort)}
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
		name := fmt.Sprintf("n%d", i+1)
		nd, err := NewServer(bin, name, filepath.Join(dir, name), filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, err
		}
		if nd.ClusterPort, err = childproc.FreePort(); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
	}
	for _, nd := range c.Nodes {
		var routes []string
		for _, o := range c.Nodes {
			if o != nd {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", o.ClusterPort))
			}
		}
		nd.Args = append(nd.serverArgs(), "-n", nd.Name, "--cluster_name", c.Name,
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", nd.ClusterPort),
			"--routes", strings.Join(routes, ","))
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
	err = childproc.Poll(ctx, d, 200*time.Millisecond, func() (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := js.CreateStream(pctx, jetstream.StreamConfig{Name: "NATSPROC_PROBE", Subjects: []string{"natsproc.probe"},
			Replicas: n, Storage: jetstream.MemoryStorage})
		if err == nil {
			err = js.DeleteStream(pctx, "NATSPROC_PROBE")
		}
		return err == nil, err
	})
	if errors.Is(err, childproc.ErrTimeout) {
		return fmt.Errorf("the cluster cannot place %d replicas: %w", n, err)
	}
	return err
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
	if err := os.MkdirAll(nd.Store, 0o700); err != nil {
		return err
	}
	return nd.Process.Start()
}

// WaitReady waits until the node accepts connections.
func (nd *Node) WaitReady(ctx context.Context, d time.Duration) error {
	return nd.WaitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", nd.ClientPort), d)
}
