// Package producer is the Go client for systems that send commands to
// idemgate: publish a command with its Nats-Msg-Id, and await its result.
// `idemgate publish` uses it.
//
// It imports wire, operation and internal/telemetry (trace context in
// headers): the wire contract, not the consumer.
package producer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
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
		resultsStream = wire.ResultsStream
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
	return c.publish(ctx, cmd, m)
}

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
	m := nats.NewMsg(wire.CommandSubject(cmd.Operation))
	m.Data = body
	msgID := opts.MsgID
	if msgID == "" {
		msgID = cmd.EventID
	}
	m.Header.Set(wire.HeaderMsgID, msgID)
	if opts.ReplyTo != "" {
		m.Header.Set(wire.HeaderReplyTo, opts.ReplyTo)
	}
	return m, nil
}

// MsgID is the Nats-Msg-Id that tells a copy of a command from a changed
// one: the operation key and the request's fingerprint. A copy (same key,
// same payload) is the same message, which the stream's duplicate window
// drops; a changed payload is another message, which reaches the daemon to
// be answered conflict.
//
// A pre-signed approval token is outside the fingerprint but not outside
// the message: a command resent with another token (the way to recover
// from a refused one) is another message, which must reach the daemon to
// be verified, not be dropped as a copy of the refused one. The token is
// named by a digest, never by itself.
func MsgID(op operation.Operation) string {
	id := op.Key.String() + "#" + op.Fingerprint
	if op.ApprovalToken != "" {
		sum := sha256.Sum256([]byte(op.ApprovalToken))
		id += "#approval-" + hex.EncodeToString(sum[:12])
	}
	return id
}

// ErrNoStream: no JetStream stream takes commands on the command's subject
// (the daemon creates the streams when it starts).
var ErrNoStream = errors.New("no JetStream stream takes this command's subject; `idemgate run` creates the streams when it starts")

// publish sends m and names a missing stream as such.
func (c *Client) publish(ctx context.Context, cmd operation.Command, m *nats.Msg) (*jetstream.PubAck, error) {
	ack, err := c.publishTraced(ctx, m, cmd.Operation)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return nil, fmt.Errorf("publish %s on %s: %w", cmd.EventID, m.Subject, ErrNoStream)
	}
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", cmd.EventID, err)
	}
	return ack, nil
}

// Publish sends a command; PubAck.Duplicate tells that JetStream already
// holds a command with this event id (within its duplicate window).
func (c *Client) Publish(ctx context.Context, cmd operation.Command) (*jetstream.PubAck, error) {
	m, err := c.msg(cmd, "")
	if err != nil {
		return nil, err
	}
	return c.publish(ctx, cmd, m)
}

// WaitError: the command was stored but no final result arrived before the
// context ended. The daemon may be stopped, have no route for the operation,
// or still be settling the outcome (Pending).
type WaitError struct {
	// Key is the operation key the result was awaited for ("" if not given).
	Key string
	// EventID is the command's event id.
	EventID string
	// Stream and Seq locate the stored command; Duplicate tells that
	// JetStream already held it.
	Stream    string
	Seq       uint64
	Duplicate bool
	// Pending is the last pending result received, if any.
	Pending *operation.Result
	// Err is the context's error.
	Err error
}

func (e *WaitError) Error() string {
	what := "no result"
	if e.Pending != nil {
		what = "still pending (the outcome is being settled; a final result follows)"
	}
	held := "stored as"
	if e.Duplicate {
		held = "already held (a duplicate event id) as"
	}
	return fmt.Sprintf("%s for %s (event %s): the command is %s %s sequence %d; it is answered once a daemon serving its operation runs: %v",
		what, orEvent(e.Key, e.EventID), e.EventID, held, e.Stream, e.Seq, e.Err)
}

func (e *WaitError) Unwrap() error { return e.Err }

func orEvent(key, event string) string {
	if key != "" {
		return key
	}
	return event
}

// PublishAndWait sends a command and waits for its final result (succeeded,
// failed_final, conflict or rejected); pending results are passed to
// onPending when it is not nil. key is the operation key the daemon derives,
// used to recognise the result when the command was a duplicate: JetStream
// already held its event id, so the daemon does not see it again, and it is
// answered with the earlier command's result, marked Replayed. A missing
// stream is ErrNoStream; a context that ends first is a *WaitError.
func (c *Client) PublishAndWait(ctx context.Context, cmd operation.Command, key string, onPending func(operation.Result)) (operation.Result, error) {
	return c.PublishAndWaitWith(ctx, cmd, key, WaitOptions{OnPending: onPending})
}

// PublishAndWaitWith is PublishAndWait with options: the Nats-Msg-Id, and
// a watch on the daemon's consumer that tells when nothing fetches the
// command.
func (c *Client) PublishAndWaitWith(ctx context.Context, cmd operation.Command, key string, opts WaitOptions) (operation.Result, error) {
	msgID, onPending := opts.MsgID, opts.OnPending
	results := make(chan operation.Result, 16)
	inbox := c.nc.NewRespInbox()
	// duplicate: JetStream already held the command. Until then the key's
	// results subject carries only other commands' results (a retry's
	// replay published just before, a changed payload's first outcome):
	// this command's own come to its inbox.
	var duplicate atomic.Bool
	handle := func(m *nats.Msg) {
		if m.Subject != inbox && !duplicate.Load() {
			return
		}
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
		watch, err := c.nc.Subscribe(wire.ResultSubject(cmd.Operation), handle)
		if err != nil {
			return operation.Result{}, fmt.Errorf("subscribe: %w", err)
		}
		defer func() { _ = watch.Unsubscribe() }()
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return operation.Result{}, fmt.Errorf("flush: %w", err)
	}
	m, err := c.msgWith(cmd, PublishOptions{MsgID: msgID, ReplyTo: inbox})
	if err != nil {
		return operation.Result{}, err
	}
	ack, err := c.publish(ctx, cmd, m)
	if err != nil {
		return operation.Result{}, err
	}
	duplicate.Store(ack.Duplicate)
	stored := make(chan operation.Result, 1)
	if ack.Duplicate && key != "" {
		// JetStream already held this command: the daemon will not answer
		// this publish. Its result is in the results stream, or about to be.
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() {
			defer close(done)
			c.watchStored(wctx, ack.Stream, cmd.Operation, key, stored)
		}()
	}
	unfetched := make(chan Unfetched, 1)
	if durable := opts.Consumers[ack.Stream]; durable != "" && opts.OnUnfetched != nil {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() {
			defer close(done)
			c.watchFetcher(wctx, Unfetched{Stream: ack.Stream, Seq: ack.Sequence, Consumer: durable}, opts.idleAfter(), unfetched)
		}()
	}
	var pending *operation.Result
	for {
		select {
		case u := <-unfetched:
			opts.OnUnfetched(u)
		case r := <-stored:
			return r, nil
		case r := <-results:
			if r.Status != operation.ResultPending {
				r.Replayed = r.Replayed || ack.Duplicate
				return r, nil
			}
			pending = &r
			if onPending != nil {
				onPending(r)
			}
		case <-ctx.Done():
			return operation.Result{}, &WaitError{Key: key, EventID: cmd.EventID, Stream: ack.Stream, Seq: ack.Sequence,
				Duplicate: ack.Duplicate, Pending: pending, Err: ctx.Err()}
		}
	}
}

// WaitOptions change how PublishAndWaitWith waits for a command's result.
type WaitOptions struct {
	// MsgID is the Nats-Msg-Id ("" for the event id); see MsgID.
	MsgID string
	// OnPending, when not nil, receives the pending results.
	OnPending func(operation.Result)
	// Consumers names, by stream, the durable consumer a daemon fetches
	// that stream's commands with (the commands stream's, the processes
	// stream's). The stream that stores the command is looked up here; a
	// stream not named is not watched.
	Consumers map[string]string
	// OnUnfetched, when not nil, is told (once, on the waiting goroutine)
	// that no daemon fetches the stored command: for IdleAfter after it was
	// stored, its consumer had no waiting pull and nothing in flight, and
	// had not delivered it — or does not exist. The wait goes on: a daemon
	// that starts meanwhile fetches the command and answers it.
	OnUnfetched func(Unfetched)
	// IdleAfter is how long the consumer must look idle. Default
	// DefaultIdleAfter.
	IdleAfter time.Duration
}

// DefaultIdleAfter is WaitOptions.IdleAfter's default: long enough to
// span a few of a daemon's fetches (nats.fetch_wait, default 500ms, and the
// gap before the next), short enough to say so within two seconds.
const DefaultIdleAfter = 1500 * time.Millisecond

func (o WaitOptions) idleAfter() time.Duration {
	if o.IdleAfter > 0 {
		return o.IdleAfter
	}
	return DefaultIdleAfter
}

// Unfetched describes a stored command that no daemon fetches.
type Unfetched struct {
	// Stream and Seq locate the stored command.
	Stream string
	Seq    uint64
	// Consumer is the durable consumer that would deliver it to a daemon;
	// Missing tells that it does not exist (no daemon ever started on this
	// stream, or it was deleted).
	Consumer string
	Missing  bool
	// Waiting is how many stored commands the consumer has not delivered.
	Waiting uint64
}

func (u Unfetched) String() string {
	why := fmt.Sprintf("its consumer %s has no waiting pull and nothing in flight, %d command(s) undelivered", u.Consumer, u.Waiting)
	if u.Missing {
		why = fmt.Sprintf("its consumer %s does not exist", u.Consumer)
	}
	return fmt.Sprintf("no daemon is fetching from %s (%s): the command is stored as %s sequence %d and stays there; "+
		"a daemon that starts (idemgate run, with this configuration) fetches it and answers it, within this wait or after it",
		u.Stream, why, u.Stream, u.Seq)
}

// watchFetcher polls the consumer that should deliver u's command and
// sends u to out when, for idleAfter, it never had a waiting pull, a
// delivery in flight, or delivered the command (a daemon fetching would
// show one of them: it keeps a pull open, renewed every nats.fetch_wait).
// It stops saying nothing at the first sign of a fetcher, or when NATS does
// not answer.
func (c *Client) watchFetcher(ctx context.Context, u Unfetched, idleAfter time.Duration, out chan<- Unfetched) {
	tick := max(idleAfter/6, 20*time.Millisecond)
	start := time.Now()
	for {
		cons, err := c.js.Consumer(ctx, u.Stream, u.Consumer)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			u.Missing, u.Waiting = true, 0
		case err != nil:
			return
		default:
			info := cons.CachedInfo()
			if info.NumWaiting > 0 || info.NumAckPending > 0 || info.Delivered.Stream >= u.Seq {
				return
			}
			u.Missing, u.Waiting = false, info.NumPending
		}
		if time.Since(start) >= idleAfter {
			select {
			case out <- u:
			case <-ctx.Done():
			}
			return
		}
		select {
		case <-time.After(tick):
		case <-ctx.Done():
			return
		}
	}
}

// storedResultsSlack is added to the duplicate window when looking back for
// a duplicate's result: clocks of the server and this host may differ.
const storedResultsSlack = time.Minute

// watchStored reads the results stream for the newest final result of key
// and sends it (marked replayed) to out. It reads what is stored and what
// is stored while it runs, so a result published just before or after the
// duplicate is found either way: once it has caught up with the stream, the
// newest final result it read is the answer (a process an operator settled
// after it was left for review has two: the settlement is the answer), and
// before any, the next one stored. It looks back only as far as a duplicate
// can be: the commands stream's duplicate window.
func (c *Client) watchStored(ctx context.Context, commandsStream, opType, key string, out chan<- operation.Result) {
	since := time.Now().Add(-24 * time.Hour)
	if st, err := c.js.Stream(ctx, commandsStream); err == nil {
		since = time.Now().Add(-st.CachedInfo().Config.Duplicates - storedResultsSlack)
	}
	oc, err := c.js.OrderedConsumer(ctx, c.resultsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{wire.ResultSubject(opType)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &since,
	})
	if err != nil {
		return
	}
	it, err := oc.Messages()
	if err != nil {
		return
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	var newest *operation.Result
	for {
		m, err := it.Next()
		if err != nil {
			return
		}
		caughtUp := true
		if md, err := m.Metadata(); err == nil {
			caughtUp = md.NumPending == 0
		}
		var r operation.Result
		if m.Headers().Get(wire.HeaderOperationKey) == key && json.Unmarshal(m.Data(), &r) == nil && r.Status != operation.ResultPending {
			newest = &r
		}
		if newest == nil || !caughtUp {
			continue
		}
		newest.Replayed = true
		select {
		case out <- *newest:
		case <-ctx.Done():
		}
		return
	}
}
