package consumer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/wire"
)

// ProcessesStreamConfig is the process commands' stream: like the
// commands stream (file storage, limits retention, the same age, duplicate
// window and size limit) on idemgate.proc.>, apart so that the workers'
// consumer never sees a process command.
func (c Config) ProcessesStreamConfig() jetstream.StreamConfig {
	return c.streamConfig(c.ProcessesStream, "idemgate process commands: one business process per Nats-Msg-Id", wire.ProcessSubjects,
		c.CommandsMaxAge, c.DuplicateWindow, c.MaxMsgSize)
}

// ProcessConsumerConfig is the process coordinators' durable pull
// consumer. A process command stays unacknowledged while its process runs
// (heartbeats keep it, a wait for a step brings it back later), so that the
// process always has an owner: whoever holds its command.
func (c Config) ProcessConsumerConfig() jetstream.ConsumerConfig {
	cc := c.ConsumerConfig()
	cc.Durable = c.ProcessDurable
	cc.Description = "idemgate process coordinators (shared by all replicas)"
	cc.FilterSubject = wire.ProcessSubjects
	return cc
}

// EnsureProcesses creates or updates the processes stream and the
// coordinators' durable consumer, and returns the consumer. Every replica
// may call it at start-up (after Ensure, which makes the results stream).
func EnsureProcesses(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Consumer, error) {
	if err := ensureStream(ctx, js, c.ProcessesStreamConfig()); err != nil {
		return nil, fmt.Errorf("processes stream %s: %w", c.ProcessesStream, err)
	}
	want := c.ProcessConsumerConfig()
	if cons, err := js.Consumer(ctx, c.ProcessesStream, c.ProcessDurable); err == nil && sameConsumer(cons.CachedInfo().Config, want) {
		return cons, nil
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, c.ProcessesStream, want)
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", c.ProcessDurable, c.ProcessesStream, err)
	}
	return cons, nil
}
