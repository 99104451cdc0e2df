package consumer

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// Delivery is one fetched command. Its handler reads it, keeps it alive
// with InProgress while it works, and settles it exactly once: Answer,
// AnswerThenNak, Reject or Nak. A result is always published before the
// command is acked or terminated.
type Delivery struct {
	r         *Router
	msg       jetstream.Msg
	fetchedAt time.Time
	key       string     // names the delivery in logs once known
	span      trace.Span // the delivery's span (trace.go); nil with tracing off
	onSettled func()     // OnSettled's
	group     *heldGroup // the fetched group it came in (Router.OldestHeld)
}

// Data is the command's body.
func (d *Delivery) Data() []byte { return d.msg.Data() }

// Subject is the subject the command was published on.
func (d *Delivery) Subject() string { return d.msg.Subject() }

// Operation is the operation type the subject names.
func (d *Delivery) Operation() (string, bool) { return wire.OperationFromSubject(d.msg.Subject()) }

// Header reads a header of the command (wire.Get).
func (d *Delivery) Header(name string) string { return wire.Get(d.msg.Headers(), name) }

// FetchedAt is when the command's batch arrived.
func (d *Delivery) FetchedAt() time.Time { return d.fetchedAt }

// SetKey names the delivery by its operation key in the Router's logs.
func (d *Delivery) SetKey(key string) { d.key = key }

// Deliveries is how often JetStream has delivered the command (0 when its
// metadata cannot be read).
func (d *Delivery) Deliveries() uint64 {
	if md, err := d.msg.Metadata(); err == nil {
		return md.NumDelivered
	}
	return 0
}

// StreamSeq is the command's sequence in the commands stream (0 when its
// metadata cannot be read).
func (d *Delivery) StreamSeq() uint64 {
	if md, err := d.msg.Metadata(); err == nil {
		return md.Sequence.Stream
	}
	return 0
}

// InProgress resets the command's AckWait: JetStream does not redeliver it
// while its handler works.
func (d *Delivery) InProgress() error { return d.msg.InProgress() }

// Answer publishes r and acks the command once JetStream has acknowledged
// r: a command is never acked before its result is durably published. A
// result that could not be published brings the command back (a nak), to be
// replayed from the journal.
func (d *Delivery) Answer(r operation.Result) {
	crashpoint.Do(crashpoint.AckBeforePublish, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = d.msg.DoubleAck(ctx)
	})
	crashpoint.Hit(crashpoint.BeforePublish)
	d.r.publish(d, r, func(err error) {
		if err != nil {
			d.r.publishFailed()
			d.r.log.Error("result not published: the command will be redelivered and the result replayed",
				"operation_key", r.OperationKey, "status", string(r.Status), "error", err.Error())
			d.Nak(time.Second)
			return
		}
		crashpoint.Hit(crashpoint.BeforeAck)
		if err := d.msg.Ack(); err != nil {
			d.r.log.Warn("ack failed: the command will be redelivered and replayed", "operation_key", r.OperationKey, "error", err.Error())
		}
		d.r.published(r.Status)
		d.r.settled(d)
	})
}

// Tell publishes r (a pending result: the outcome is being settled) and
// keeps the command: its handler settles it later, as always exactly once.
func (d *Delivery) Tell(r operation.Result) {
	d.r.publish(d, r, func(err error) {
		if err == nil {
			d.r.published(r.Status)
		} else {
			d.r.publishFailed()
		}
	})
}

// OnSettled has f run once the command is settled (acked, naked or
// terminated; its slot already free). It must be set before the handler
// can settle the command, and f must not block.
func (d *Delivery) OnSettled(f func()) { d.onSettled = f }

// AnswerThenNak publishes r (a pending result: the outcome is being
// settled) and brings the command back after delay, published or not.
func (d *Delivery) AnswerThenNak(r operation.Result, delay time.Duration) {
	d.r.publish(d, r, func(err error) {
		if err == nil {
			d.r.published(r.Status)
		} else {
			d.r.publishFailed()
		}
		d.Nak(delay)
	})
}

// Reject publishes r (a rejected result) and terminates the command with
// reason once JetStream has acknowledged r; a rejection that could not be
// published brings the command back to be rejected again.
func (d *Delivery) Reject(r operation.Result, reason string) {
	d.r.publish(d, r, func(err error) {
		if err != nil {
			d.r.publishFailed()
			d.r.log.Error("rejected result not published; retrying by redelivery",
				"reason", reason, "operation_key", r.OperationKey, "stream_seq", r.CommandSeq, "error", err.Error())
			d.Nak(time.Second)
			return
		}
		d.r.published(r.Status)
		if err := d.msg.TermWithReason(reason); err != nil {
			d.r.log.Warn("term failed", "reason", reason, "operation_key", r.OperationKey, "stream_seq", r.CommandSeq, "error", err.Error())
		}
		d.r.settled(d)
	})
}

// Nak returns the command to JetStream after delay (at once when delay is
// not positive) and settles it. On its last delivery (nats.max_deliver) the
// command is requeued instead (requeue.go): JetStream would not deliver it
// again, and a command must not be left without a result.
func (d *Delivery) Nak(delay time.Duration) {
	if d.lastDelivery() {
		go d.requeue()
		return
	}
	var err error
	if delay <= 0 {
		err = d.msg.Nak()
	} else {
		err = d.msg.NakWithDelay(delay)
	}
	if err != nil {
		d.r.log.Warn("nak failed: AckWait will redeliver", "operation_key", d.key, "error", err.Error())
	}
	d.r.settled(d)
}

// Forsake settles the delivery here without telling JetStream anything, as
// a process killed while holding it would leave it: the command is
// redelivered once AckWait passes (heartbeats, if any, must have stopped).
// It frees the delivery's place in this consumer, so that a component that
// stops dead at a boundary on purpose (process/coordinator's AtBoundary)
// does not hold its router's drain.
func (d *Delivery) Forsake() { d.r.settled(d) }

// ReplyTo is the core NATS subject the command asks its result to be sent
// to as well ("" when none).
func (d *Delivery) ReplyTo() string { return d.Header(wire.HeaderReplyTo) }
