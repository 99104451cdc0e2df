package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/idemgate/idemgate/internal/testkit/childproc"
)

// Cluster is an embedded JetStream cluster of n servers on loopback, each
// with its own store, routed to one another.
type Cluster struct {
	Servers []*server.Server
	Name    string
	routes  []int // each server's route port
}

// StartCluster starts n JetStream servers named n1…nN in cluster "idemgate"
// (each option applied to every server's options) and waits until they
// have elected a meta leader that every server follows; they are shut
// down when the test ends.
func StartCluster(tb testing.TB, n int, opts ...func(*server.Options)) *Cluster {
	tb.Helper()
	c := NewCluster(tb, n, opts...)
	for i := range c.Servers {
		c.Start(tb, i)
	}
	c.WaitFormed(tb)
	return c
}

// NewCluster builds the servers of StartCluster without starting any, for
// a test of what a client meets while a cluster forms: Start each, then
// WaitFormed.
func NewCluster(tb testing.TB, n int, opts ...func(*server.Options)) *Cluster {
	tb.Helper()
	ports := make([]int, n)
	for i := range ports {
		p, err := childproc.FreePort()
		if err != nil {
			tb.Fatalf("cluster port: %v", err)
		}
		ports[i] = p
	}
	c := &Cluster{Name: "idemgate", routes: ports}
	for i := 0; i < n; i++ {
		var routes []string
		for j, p := range ports {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		sopts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: tb.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		for _, o := range opts {
			o(sopts)
		}
		ns, err := server.NewServer(sopts)
		if err != nil {
			tb.Fatalf("nats server n%d: %v", i+1, err)
		}
		c.Servers = append(c.Servers, ns)
		tb.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	}
	return c
}

// Start starts server i (from 0) and waits until it takes connections.
func (c *Cluster) Start(tb testing.TB, i int) {
	tb.Helper()
	ns := c.Servers[i]
	go ns.Start()
	// Start enables JetStream (its store and the meta group's log) before
	// it listens, which on a loaded machine has taken over 10 s.
	if !ns.ReadyForConnections(time.Minute) {
		tb.Fatalf("nats server %s not ready in 1m: %s", ns.Name(), c.why(i))
	}
}

// WaitFormed waits until one server is the JetStream meta leader and every
// server is current with it: a stream request sent before that may be
// dropped by a server that has not learnt the leader yet.
func (c *Cluster) WaitFormed(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leaders, current := 0, 0
		for _, ns := range c.Servers {
			if ns.JetStreamIsLeader() {
				leaders++
			}
			if ns.JetStreamIsCurrent() {
				current++
			}
		}
		if leaders == 1 && current == len(c.Servers) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nats cluster: not formed in 30s (%d meta leaders, %d of %d servers current)", leaders, current, len(c.Servers))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URLs is the client URL of every server, comma-separated as nats.url takes it.
func (c *Cluster) URLs() string {
	var urls []string
	for _, ns := range c.Servers {
		urls = append(urls, ns.ClientURL())
	}
	return strings.Join(urls, ",")
}

// why tells what server i has not opened yet, and whether another process
// holds its route port.
func (c *Cluster) why(i int) string {
	ns := c.Servers[i]
	var missing []string
	if ns.Addr() == nil {
		missing = append(missing, "client listener")
	}
	if ns.ClusterAddr() == nil {
		missing = append(missing, "route listener")
		addr := fmt.Sprintf("127.0.0.1:%d", c.routes[i])
		if l, err := net.Listen("tcp", addr); err != nil {
			missing = append(missing, "route port "+addr+" taken: "+err.Error())
		} else {
			_ = l.Close()
		}
	}
	if len(missing) == 0 {
		return "every listener open"
	}
	return strings.Join(missing, "; ")
}
