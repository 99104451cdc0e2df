package consumer

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The handles a Router and PublishResult work with, named here so that
// packages which only pass them along (worker) need not import nats.go.
type (
	// JetStream is a JetStream context (jetstream.New).
	JetStream = jetstream.JetStream
	// Conn is a core NATS connection.
	Conn = nats.Conn
	// Pull is the durable pull consumer Ensure returns.
	Pull = jetstream.Consumer
)
