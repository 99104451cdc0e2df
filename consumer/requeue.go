package consumer

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/wire"
)

// Requeue tries: a copy is published with up to requeueTries PubAck waits
// of requeueWait each, requeuePause apart.
const (
	requeueTries = 3
	requeueWait  = 10 * time.Second
	requeuePause = time.Second
)

// lastDelivery reports whether JetStream will not deliver the command again
// once this delivery is settled: it has been delivered max_deliver times.
func (d *Delivery) lastDelivery() bool {
	if d.r.cfg.MaxDeliver <= 0 {
		return false
	}
	md, err := d.msg.Metadata()
	return err == nil && md.NumDelivered >= uint64(d.r.cfg.MaxDeliver)
}

// requeue keeps a command JetStream would otherwise stop delivering: a nak
// on its last delivery (a journal still down, a route not yet configured,
// a result not yet published, an outcome still being settled) would leave
// it in the stream with no result, no row and no one to answer it. A copy
// with the same subject, body and headers is published first (its own
// Nats-Msg-Id, the first-stored time and a requeue count added); only once
// JetStream has stored it is the original terminated. A command older than
// nats.commands_max_age is not requeued but given up, loudly: the journal's
// retention is only checked to outlast that age, so a copy living longer
// could find its intent's row deleted and execute it again.
func (d *Delivery) requeue() {
	defer d.r.settled(d)
	md, err := d.msg.Metadata()
	if err != nil {
		d.giveUp("its metadata cannot be read: " + err.Error())
		return
	}
	first := md.Timestamp
	if v := d.Header(wire.HeaderFirstStored); v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			first = t
		}
	}
	if age := time.Since(first); d.r.cfg.CommandsMaxAge > 0 && age >= d.r.cfg.CommandsMaxAge {
		d.giveUp("it is older than nats.commands_max_age (" + d.r.cfg.CommandsMaxAge.String() + ")")
		if err := d.msg.TermWithReason("commands_max_age"); err != nil {
			d.r.log.Warn("term failed", "operation_key", d.key, "stream_seq", md.Sequence.Stream, "error", err.Error())
		}
		return
	}
	requeues, _ := strconv.Atoi(d.Header(wire.HeaderRequeues))
	m := nats.NewMsg(d.msg.Subject())
	m.Data = d.msg.Data()
	for k, v := range d.msg.Headers() {
		// The server's own headers (Nats-Msg-Id, Nats-Expected-*) are not
		// the command's; ours are set below.
		if strings.HasPrefix(strings.ToLower(k), "nats-") || strings.EqualFold(k, wire.HeaderFirstStored) || strings.EqualFold(k, wire.HeaderRequeues) {
			continue
		}
		m.Header[k] = append([]string(nil), v...)
	}
	m.Header.Set(wire.HeaderMsgID, wire.RequeueMsgID(md.Stream, md.Sequence.Stream))
	m.Header.Set(wire.HeaderFirstStored, first.UTC().Format(time.RFC3339Nano))
	m.Header.Set(wire.HeaderRequeues, strconv.Itoa(requeues+1))

	var ack *jetstream.PubAck
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), requeueWait)
		ack, err = d.r.js.PublishMsg(ctx, m, jetstream.WithExpectStream(md.Stream))
		cancel()
		if err == nil || try == requeueTries {
			break
		}
		time.Sleep(requeuePause)
	}
	if err != nil {
		d.giveUp("its copy could not be published (" + err.Error() + "); the original stays in the commands stream, undelivered, until nats.commands_max_age")
		return
	}
	if err := d.msg.TermWithReason("requeued"); err != nil {
		// The copy is stored; the original is past max_deliver and will not
		// come back either way.
		d.r.log.Warn("term failed", "operation_key", d.key, "stream_seq", md.Sequence.Stream, "error", err.Error())
	}
	if d.r.hooks.Requeued != nil {
		d.r.hooks.Requeued()
	}
	d.r.log.Warn("command requeued: nats.max_deliver reached with no final result yet",
		"operation_key", d.key, "stream_seq", md.Sequence.Stream, "requeued_as", ack.Sequence,
		"requeues", requeues+1, "first_stored", first.UTC().Format(time.RFC3339))
}

// giveUp reports a command that will get no result.
func (d *Delivery) giveUp(why string) {
	if d.r.hooks.GivenUp != nil {
		d.r.hooks.GivenUp()
	}
	d.r.log.Error("command given up with no result: "+why,
		"operation_key", d.key, "stream_seq", d.StreamSeq(), "subject", d.msg.Subject())
}
