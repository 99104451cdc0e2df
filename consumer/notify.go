package consumer

import (
	"context"
	"errors"
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
func EnsureNotify(ctx context.Context, js jetstream.JetStream, c Config, maxAge, window, ackWait time.Duration, maxDeliver int) (*NotifyFeed, error) {
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
	return &NotifyFeed{cons: cons}, nil
}

// NotifyFeed is the notify stream as the notifier reads it.
type NotifyFeed struct{ cons jetstream.Consumer }

// Notice is one notification to deliver.
type Notice struct{ m jetstream.Msg }

// Next fetches up to max notices, waiting at most wait for the first; none
// is not an error.
func (f *NotifyFeed) Next(max int, wait time.Duration) ([]Notice, error) {
	batch, err := f.cons.Fetch(max, jetstream.FetchMaxWait(wait))
	if err != nil {
		if errors.Is(err, jetstream.ErrNoMessages) {
			return nil, nil
		}
		return nil, err
	}
	var out []Notice
	for m := range batch.Messages() {
		out = append(out, Notice{m: m})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && len(out) == 0 {
		return nil, err
	}
	return out, nil
}

// Data is the notification's body.
func (n Notice) Data() []byte { return n.m.Data() }

// ID is the notification's message id, the same on every delivery of it.
func (n Notice) ID() string { return n.m.Headers().Get(wire.HeaderMsgID) }

// Attempt is this delivery's number, from 1.
func (n Notice) Attempt() int {
	if md, err := n.m.Metadata(); err == nil && md != nil {
		return int(md.NumDelivered)
	}
	return 1
}

// Done acknowledges a delivered notification.
func (n Notice) Done() error { return n.m.Ack() }

// Retry has the notification delivered again after delay.
func (n Notice) Retry(delay time.Duration) error { return n.m.NakWithDelay(delay) }

// GiveUp ends the notification's deliveries.
func (n Notice) GiveUp() error { return n.m.Term() }

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
