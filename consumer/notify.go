package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/wire"
)

// Approval notifications: when an intent starts to wait for a person, the
// worker publishes one message to the notify stream (wire.NotifySubject),
// and the notifier (worker.Notifier) delivers it as a signed HTTP POST,
// retried until the receiver answers 2xx or the attempts run out. The
// stream's duplicate window is the longest approval wait: a copy or a
// redelivery of the waiting command publishes the same message id (the key
// and the request's time) and is dropped, so a request is announced once
// however often its command comes back. A stream of its own, rather than a
// call from the worker, keeps a slow or dead receiver away from command
// processing and survives a daemon's restart.

// NotifyDurable is the notifier's durable consumer (shared by replicas).
const NotifyDurable = "idemgate-notifier"

// NotifyStreamName is the notify stream's name: the commands stream's with
// a _NOTIFY suffix, as the parked stream's.
func (c Config) NotifyStreamName() string {
	if c.CommandsStream == "" || c.CommandsStream == wire.CommandsStream {
		return wire.NotifyStream
	}
	return c.CommandsStream + "_NOTIFY"
}

// NotifyStreamConfig is the notify stream's definition: messages kept
// maxAge, deduplicated over window (the longest approval wait).
func (c Config) NotifyStreamConfig(maxAge, window time.Duration) jetstream.StreamConfig {
	s := c.streamConfig(c.NotifyStreamName(), "idemgate approval requests to announce (approvals.notify)",
		wire.NotifySubject, maxAge, min(window, maxAge), 64<<10)
	return s
}

// EnsureNotify creates or updates the notify stream and the notifier's
// durable consumer: ackWait bounds one delivery attempt, maxDeliver the
// attempts.
func EnsureNotify(ctx context.Context, js jetstream.JetStream, c Config, maxAge, window, ackWait time.Duration, maxDeliver int) (jetstream.Consumer, error) {
	want := c.NotifyStreamConfig(maxAge, window)
	if err := ensureStream(ctx, js, want); err != nil {
		return nil, fmt.Errorf("notify stream %s: %w", want.Name, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, want.Name, jetstream.ConsumerConfig{
		Durable:       NotifyDurable,
		Description:   "idemgate approval notifications (shared by all replicas)",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    maxDeliver,
		MaxAckPending: 64,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("notify consumer on %s: %w", want.Name, err)
	}
	return cons, nil
}

// PublishNotification publishes one approval notification under msgID
// (dropped as a duplicate within the stream's window).
func PublishNotification(ctx context.Context, js jetstream.JetStream, msgID string, body []byte) (duplicate bool, err error) {
	m := nats.NewMsg(wire.NotifySubject)
	m.Data = body
	m.Header.Set(wire.HeaderMsgID, msgID)
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return false, fmt.Errorf("publish approval notification: %w", err)
	}
	return ack.Duplicate, nil
}
