// Package producer is the Go client for systems that send commands to
// idemgate: publish a command with its Nats-Msg-Id, and await its result.
// `idemgate publish` uses it.
//
// It imports consumer and operation.
package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/operation"
)

// Client publishes commands.
type Client struct {
	nc            *nats.Conn
	js            jetstream.JetStream
	resultsStream string
}

// New returns a client on nc. resultsStream is the results stream's name
// ("" for the default).
func New(nc *nats.Conn, resultsStream string) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if resultsStream == "" {
		resultsStream = consumer.Config{}.WithDefaults().ResultsStream
	}
	return &Client{nc: nc, js: js, resultsStream: resultsStream}, nil
}

// ErrNoEventID: a command needs its stable event id, which is also its
// Nats-Msg-Id.
var ErrNoEventID = errors.New("producer: command has no event_id")

func (c *Client) msg(cmd operation.Command, replyTo string) (*nats.Msg, error) {
	return c.msgWith(cmd, PublishOptions{ReplyTo: replyTo})
}

// PublishOptions change how PublishWith sends a command.
type PublishOptions struct {
	// MsgID is the Nats-Msg-Id, the stream's deduplication id; "" means the
	// command's event id.
	MsgID string
	// ReplyTo names a core NATS subject that also receives the command's
	// results (the Idemgate-Reply-To header), pending ones included.
	ReplyTo string
}

// PublishWith sends a command with its own deduplication id and reply
// subject. PubAck.Duplicate tells that JetStream already holds a command
// with that id (within its duplicate window): the daemon will not see this
// copy, and no result is sent to its ReplyTo.
func (c *Client) PublishWith(ctx context.Context, cmd operation.Command, opts PublishOptions) (*jetstream.PubAck, error) {
	m, err := c.msgWith(cmd, opts)
	if err != nil {
		return nil, err
	}
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", cmd.EventID, err)
	}
	return ack, nil
}

// ResultSubject is the subject results of an operation type are published
// on; every result carries its operation key in the HeaderOperationKey
// header.
func ResultSubject(opType string) string { return consumer.ResultSubject(opType) }

// HeaderOperationKey is the result header holding the operation key.
const HeaderOperationKey = consumer.HeaderOperationKey

func (c *Client) msgWith(cmd operation.Command, opts PublishOptions) (*nats.Msg, error) {
	if cmd.EventID == "" {
		return nil, ErrNoEventID
	}
	if cmd.Operation == "" {
		return nil, errors.New("producer: command has no operation")
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("producer: encode command: %w", err)
	}
	m := nats.NewMsg(consumer.CommandSubject(cmd.Operation))
	m.Data = body
	msgID := opts.MsgID
	if msgID == "" {
		msgID = cmd.EventID
	}
	m.Header.Set(consumer.HeaderMsgID, msgID)
	if opts.ReplyTo != "" {
		m.Header.Set(consumer.HeaderReplyTo, opts.ReplyTo)
	}
	return m, nil
}

// Publish sends a command; PubAck.Duplicate tells that JetStream already
// holds a command with this event id (within its duplicate window).
func (c *Client) Publish(ctx context.Context, cmd operation.Command) (*jetstream.PubAck, error) {
	m, err := c.msg(cmd, "")
	if err != nil {
		return nil, err
	}
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", cmd.EventID, err)
	}
	return ack, nil
}

// PublishAndWait sends a command and waits for its final result (succeeded,
// failed_final, conflict or rejected); pending results are passed to
// onPending when it is not nil. key is the operation key the daemon derives,
// used to recognise the result when the command was a duplicate.
func (c *Client) PublishAndWait(ctx context.Context, cmd operation.Command, key string, onPending func(operation.Result)) (operation.Result, error) {
	results := make(chan operation.Result, 16)
	inbox := c.nc.NewRespInbox()
	handle := func(m *nats.Msg) {
		var r operation.Result
		if json.Unmarshal(m.Data, &r) == nil && (key == "" || r.OperationKey == key || m.Subject == inbox) {
			select {
			case results <- r:
			default:
			}
		}
	}
	sub, err := c.nc.Subscribe(inbox, handle)
	if err != nil {
		return operation.Result{}, fmt.Errorf("subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if key != "" {
		watch, err := c.nc.Subscribe(consumer.ResultSubject(cmd.Operation), handle)
		if err != nil {
			return operation.Result{}, fmt.Errorf("subscribe: %w", err)
		}
		defer func() { _ = watch.Unsubscribe() }()
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return operation.Result{}, fmt.Errorf("flush: %w", err)
	}
	m, err := c.msg(cmd, inbox)
	if err != nil {
		return operation.Result{}, err
	}
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		return operation.Result{}, fmt.Errorf("publish %s: %w", cmd.EventID, err)
	}
	if ack.Duplicate && key != "" {
		// JetStream already held this command: its result may be out already.
		if r, ok := c.lastResult(ctx, cmd.Operation, key); ok {
			return r, nil
		}
	}
	for {
		select {
		case r := <-results:
			if r.Status != operation.ResultPending {
				return r, nil
			}
			if onPending != nil {
				onPending(r)
			}
		case <-ctx.Done():
			return operation.Result{}, fmt.Errorf("waiting for the result of %s: %w", cmd.EventID, ctx.Err())
		}
	}
}

// lastResult scans the results stream for the newest final result of key.
func (c *Client) lastResult(ctx context.Context, opType, key string) (operation.Result, bool) {
	oc, err := c.js.OrderedConsumer(ctx, c.resultsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{consumer.ResultSubject(opType)},
	})
	if err != nil {
		return operation.Result{}, false
	}
	info, err := oc.Info(ctx)
	if err != nil || info.NumPending == 0 {
		return operation.Result{}, false
	}
	var found operation.Result
	var ok bool
	for remaining := info.NumPending; remaining > 0; {
		batch, err := oc.Fetch(int(min(remaining, 500)))
		if err != nil {
			break
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if m.Headers().Get(consumer.HeaderOperationKey) != key {
				continue
			}
			var r operation.Result
			if json.Unmarshal(m.Data(), &r) == nil && r.Status != operation.ResultPending {
				found, ok = r, true
			}
		}
		if n == 0 {
			break
		}
		remaining -= uint64(n)
	}
	if ok {
		found.Replayed = true
	}
	return found, ok
}
