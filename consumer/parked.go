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

// Parked commands: a command whose intent waits for a person's approval
// is copied, as delivered (body and headers), to the parked stream under
// its key (wire.ParkedSubject), then acknowledged. Its payload never enters
// the journal, which keeps only the masked request; when the approval is
// decided (approved, denied or expired) the daemon publishes the parked copy
// again on its own subject, and the worker carries the decision out through
// the ordinary claim: an approved intent executes once under a lease, a
// denied or expired one replays its failed_final outcome.
//
// Why a stream of its own rather than holding the delivery (a nak with a
// delay, or in-progress heartbeats, for up to approval_ttl): a held
// delivery spends the consumer's redeliveries (max_deliver) and its
// max_ack_pending slots for as long as a person takes, a day by default, so
// a few hundred waiting charges would stall every other command; and a
// delivery that runs out of redeliveries is lost while its approval is
// still pending. A parked copy costs one message per key: the stream keeps
// the last message per subject (copies of one intent overwrite each other,
// their payloads having the same fingerprint), and its max age — the
// longest approval_ttl plus a margin — bounds how long a payload stays.

// ParkedStreamConfig is the parked stream's definition: one message per
// key, kept maxAge.
func (c Config) ParkedStreamConfig(maxAge time.Duration) jetstream.StreamConfig {
	s := c.streamConfig(c.ParkedStreamName(), "idemgate commands waiting for a person's approval, one per operation key",
		wire.ParkedSubjects, maxAge, 0, c.MaxMsgSize)
	s.MaxMsgsPerSubject = 1
	return s
}

// ParkedStreamName is the parked stream's name: the commands stream's
// with a _PARKED suffix, so that two deployments sharing a NATS keep
// theirs apart as they keep their commands apart.
func (c Config) ParkedStreamName() string {
	if c.CommandsStream == "" || c.CommandsStream == wire.CommandsStream {
		return wire.ParkedStream
	}
	return c.CommandsStream + "_PARKED"
}

// EnsureParked creates or updates the parked stream.
func EnsureParked(ctx context.Context, js jetstream.JetStream, c Config, maxAge time.Duration) error {
	want := c.ParkedStreamConfig(maxAge)
	if err := ensureStream(ctx, js, want); err != nil {
		return fmt.Errorf("parked stream %s: %w", want.Name, err)
	}
	return nil
}

// Park copies d to the parked stream under key and waits for the stream's
// acknowledgement. Parking again (a copy, a redelivery) replaces the copy.
func Park(ctx context.Context, js jetstream.JetStream, key string, d *Delivery) error {
	m := nats.NewMsg(wire.ParkedSubject(key))
	m.Data = d.Data()
	for name, vs := range d.msg.Headers() {
		if name == wire.HeaderMsgID || len(name) > 13 && name[:13] == "Nats-Expected" {
			continue
		}
		m.Header[name] = vs
	}
	m.Header.Set(wire.HeaderParkedSubject, d.Subject())
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("park %s: %w", key, err)
	}
	return nil
}

// ErrNotParked: no parked command for the key (never parked, or aged out).
var ErrNotParked = errors.New("consumer: no parked command")

// Release publishes key's parked command again on its own subject, with
// Nats-Msg-Id msgID, and returns that subject.
func Release(ctx context.Context, js jetstream.JetStream, c Config, key, msgID string) (string, error) {
	st, err := js.Stream(ctx, c.ParkedStreamName())
	if err != nil {
		return "", fmt.Errorf("release %s: %w", key, err)
	}
	raw, err := st.GetLastMsgForSubject(ctx, wire.ParkedSubject(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", fmt.Errorf("release %s: %w", key, ErrNotParked)
	}
	if err != nil {
		return "", fmt.Errorf("release %s: %w", key, err)
	}
	subject := raw.Header.Get(wire.HeaderParkedSubject)
	if subject == "" {
		return "", fmt.Errorf("release %s: the parked copy names no subject", key)
	}
	m := nats.NewMsg(subject)
	m.Data = raw.Data
	for name, vs := range raw.Header {
		if name != wire.HeaderParkedSubject {
			m.Header[name] = vs
		}
	}
	m.Header.Set(wire.HeaderMsgID, msgID)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return "", fmt.Errorf("release %s: %w", key, err)
	}
	return subject, nil
}
