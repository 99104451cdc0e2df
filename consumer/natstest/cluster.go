package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is an embedded JetStream cluster of n servers on loopback, each
// with its own store, routed to one another.
type Cluster struct {
	Servers []*server.Server
	Name    string
}

// StartCluster starts n JetStream servers named n1…nN in cluster "idemgate"
// (each option applied to every server's options) and waits until they
// have elected a meta leader; they are shut down when
// the test ends.
func StartCluster(tb testing.TB, n int, opts ...func(*server.Options)) *Cluster {
	tb.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("cluster port: %v", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	c := &Cluster{Name: "idemgate"}
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
		go ns.Start()
		c.Servers = append(c.Servers, ns)
		tb.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	}
	for _, ns := range c.Servers {
		if !ns.ReadyForConnections(10 * time.Second) {
			tb.Fatalf("nats server %s not ready", ns.Name())
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader := false
		for _, ns := range c.Servers {
			if ns.JetStreamIsLeader() {
				leader = true
			}
		}
		if leader {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nats cluster: no JetStream meta leader in 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// URLs is the client URL of every server, comma-separated as nats.url takes it.
func (c *Cluster) URLs() string {
	var urls []string
	for _, ns := range c.Servers {
		urls = append(urls, ns.ClientURL())
	}
	return strings.Join(urls, ",")
}
