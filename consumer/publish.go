package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/operation"
)

// PubAckTimeout bounds the wait for a result's PubAck. JetStream answers
// within milliseconds; a PubAck lost on the way (a cluster changing leader)
// must not hold the command's slot for ever. The command is then redelivered
// and its result, replayed from the journal, published again (the results
// stream drops the duplicate by its Nats-Msg-Id).
const PubAckTimeout = 10 * time.Second

// ErrPubAckTimeout: no PubAck within PubAckTimeout.
var ErrPubAckTimeout = errors.New("consumer: no PubAck for the result in time")

// pubWait is a published result waiting for its PubAck.
type pubWait struct {
	fut  jetstream.PubAckFuture
	then func(error)
	by   time.Time
}

// publish sends r to the results stream asynchronously (and to the
// command's reply subject), and calls then with the PubAck's outcome, in
// publish order.
func (r *Router) publish(d *Delivery, res operation.Result, then func(error)) {
	m, err := ResultMsg(res)
	if err != nil {
		then(err)
		return
	}
	then = d.tracePublish(m, res, then)
	if replyTo := d.ReplyTo(); replyTo != "" && r.nc != nil {
		if err := r.nc.Publish(replyTo, m.Data); err != nil {
			r.log.Warn("reply not sent", "operation_key", res.OperationKey, "error", err.Error())
		}
	}
	fut, err := r.js.PublishMsgAsync(m)
	if err != nil {
		then(err)
		return
	}
	r.pubAcks <- pubWait{fut: fut, then: then, by: time.Now().Add(PubAckTimeout)}
}

// ackLoop hands each published result its PubAck, oldest first: one
// goroutine for all of them, as PubAcks come back in publish order.
func (r *Router) ackLoop() {
	defer close(r.ackDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for p := range r.pubAcks {
		select {
		case <-p.fut.Ok():
			p.then(nil)
			continue
		case err := <-p.fut.Err():
			p.then(err)
			continue
		default:
		}
		timer.Reset(time.Until(p.by))
		select {
		case <-p.fut.Ok():
			p.then(nil)
		case err := <-p.fut.Err():
			p.then(err)
		case <-timer.C:
			p.then(ErrPubAckTimeout)
		}
		timer.Stop()
	}
}

// PublishResult publishes r synchronously, waiting for its PubAck: the
// path of results no delivery carries (a reconciler's settlement, an
// operator's decision).
func PublishResult(ctx context.Context, js jetstream.JetStream, r operation.Result) error {
	m, err := ResultMsg(r)
	if err != nil {
		return err
	}
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish result of %s: %w", r.OperationKey, err)
	}
	return nil
}
