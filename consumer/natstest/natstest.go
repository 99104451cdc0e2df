// Package natstest runs a real, embedded JetStream server for tests, with
// restart on the same port and store so tests can take NATS away and back.
//
// It imports the nats-server module, nats.go and internal/testkit/childproc;
// only tests and internal/testkit/daemontest import it.
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is an embedded JetStream server owned by a test.
type Server struct {
	tb   testing.TB
	opts server.Options
	ns   *server.Server
}

// Start starts a JetStream server on a free loopback port, storing under a
// temporary folder; it is shut down when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, opts: server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(),
		NoLog: true, NoSigs: true,
	}}
	s.Restart()
	tb.Cleanup(s.Shutdown)
	return s
}

// Restart starts the server again (same port, same store) after Shutdown.
func (s *Server) Restart() {
	s.tb.Helper()
	ns, err := server.NewServer(&s.opts)
	if err != nil {
		s.tb.Fatalf("nats server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		s.tb.Fatalf("nats server not ready")
	}
	s.ns = ns
	if addr, ok := ns.Addr().(*net.TCPAddr); ok {
		s.opts.Port = addr.Port
	}
}

// Shutdown stops the server; safe to call twice.
func (s *Server) Shutdown() {
	if s.ns != nil {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		s.ns = nil
	}
}

// URL is the client URL.
func (s *Server) URL() string { return s.ns.ClientURL() }

// Connect returns a connection and its JetStream context, closed when the
// test ends. The connection reconnects forever (restarts are part of tests).
func (s *Server) Connect(tb testing.TB) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(s.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		tb.Fatalf("nats connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("jetstream: %v", err)
	}
	return nc, js
}
