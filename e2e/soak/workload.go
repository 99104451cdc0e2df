package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// Operations the workload sends, each routed to an emulator.
var workloadOps = []string{operation.TypeInvoiceCreate, operation.TypePaymentCharge, operation.TypePaymentRefund, operation.TypeTaskCreate, operation.TypeDealCreate}

// The CRM operations go to Bitrix24, whose portal admits a few requests a
// second (its published REST limit: 5/s on Enterprise); the others share the rest of
// the rate.
var (
	crmOps   = []string{operation.TypeTaskCreate, operation.TypeDealCreate}
	otherOps = []string{operation.TypeInvoiceCreate, operation.TypePaymentCharge, operation.TypePaymentRefund}
)

// freshShare is the part of the messages that are new intents (the rest are
// copies, conflicting copies and poison).
const freshShare = 0.67

// crmShareFor is the part of new intents that go to the CRM so that they
// arrive at crmRate a second out of rate messages a second.
func crmShareFor(rate, crmRate float64) float64 {
	if rate <= 0 || crmRate <= 0 {
		return 0
	}
	return min(0.4, crmRate/(rate*freshShare))
}

// replySubject receives every command's result (core NATS, best effort).
const replySubject = "soak.reply"

// workload publishes commands at a steady rate and records each one.
type workload struct {
	rate     float64
	crmShare float64 // the part of new intents sent to the CRM
	// procShare is the part of new intents that are checkouts.
	procShare float64
	env       string
	canary    string
	keyless   bool // send non-JSON poison (no key derivable)
	rng       *rand.Rand
	rngMu     sync.Mutex
	js        jetstream.JetStream
	dec       *operation.Decoder
	inflight  atomic.Int64

	mu       sync.Mutex
	sent     []*Sent
	byMsg    map[string]*Sent
	intents  []*intentSpec // every valid intent so far, for copies
	payments []string      // succeeded charges' payment ids, for refunds
	seq      int
	retries  atomic.Int64
	// giveUp ends publish retries when the soak tears down.
	giveUp chan struct{}
}

// intentSpec is one business intent: its command, and whether another
// content has been sent under its key.
type intentSpec struct {
	cmd operation.Command
	key string
	fp  string
}

type outgoing struct {
	s    *Sent
	subj string
	body []byte
}

func newWorkload(js jetstream.JetStream, env, canary string, rate, crmRate float64, seed uint64, keyless bool) *workload {
	return &workload{rate: rate, crmShare: crmShareFor(rate, crmRate), env: env, canary: canary, keyless: keyless, js: js,
		rng: rand.New(rand.NewPCG(seed, seed+1)), dec: &operation.Decoder{Env: env},
		byMsg: map[string]*Sent{}, giveUp: make(chan struct{})}
}

func (w *workload) float() float64 {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return w.rng.Float64()
}

func (w *workload) intn(n int) int {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return w.rng.IntN(n)
}

// payload builds an operation's payload; alt changes a significant field.
func (w *workload) payload(op, intent string, alt bool) (json.RawMessage, string) {
	amount := 10000 + w.intn(90000)*10
	if alt {
		amount += 1
	}
	var p map[string]any
	approval := ""
	switch op {
	case operation.TypeInvoiceCreate:
		p = map[string]any{"order_id": "o-" + intent, "customer_id": fmt.Sprintf("c-%d", w.intn(50)), "amount_minor": amount,
			"currency": "RUB", "description": "Invoice for order " + intent + " " + w.canary + "-" + intent}
	case operation.TypePaymentCharge:
		p = map[string]any{"account_id": "merchant-account-17", "order_id": "o-" + intent, "amount_minor": amount, "currency": "RUB"}
		approval = "appr-" + intent
	case operation.TypePaymentRefund:
		w.mu.Lock()
		pay := ""
		if len(w.payments) > 0 {
			pay = w.payments[w.intn(len(w.payments))]
		}
		w.mu.Unlock()
		r := 100
		if alt {
			r = 101
		}
		p = map[string]any{"payment_id": pay, "amount_minor": r, "currency": "RUB"}
		approval = "appr-" + intent
	case operation.TypeTaskCreate:
		title := "Call back about order " + intent
		if alt {
			title += " (changed)"
		}
		p = map[string]any{"title": title, "responsible_id": "7", "customer_id": fmt.Sprintf("c-%d", w.intn(50)),
			"description": "Customer notes: " + w.canary + "-" + intent}
	case operation.TypeDealCreate:
		p = map[string]any{"title": "Deal " + intent, "customer_id": fmt.Sprintf("c-%d", w.intn(50)), "amount_minor": amount, "currency": "RUB"}
	}
	b, _ := json.Marshal(p)
	return b, approval
}

// next builds the next message.
func (w *workload) next() (outgoing, error) {
	w.mu.Lock()
	w.seq++
	n := w.seq
	havePayments := len(w.payments) > 0
	var earlier *intentSpec
	if len(w.intents) > 0 {
		// Copies come from the recent past mostly, sometimes from far back.
		i := len(w.intents) - 1 - w.intn(min(len(w.intents), 2000))
		if w.intn(10) == 0 {
			i = w.intn(len(w.intents))
		}
		earlier = w.intents[i]
	}
	w.mu.Unlock()
	msgID := fmt.Sprintf("m%07d", n)
	x := w.float()
	kind := KindFresh
	switch {
	case earlier != nil && x < 0.30:
		kind = KindCopy
	case earlier != nil && x < 0.32:
		kind = KindAlt
	case x < 0.33:
		kind = KindPoison
		if w.keyless && w.intn(4) == 0 {
			kind = KindKeyless
		}
	}
	s := &Sent{MsgID: msgID, Kind: kind}
	var cmd operation.Command
	switch kind {
	case KindCopy:
		cmd = earlier.cmd
		cmd.EventID = msgID
	case KindAlt:
		cmd = earlier.cmd
		cmd.EventID = msgID
		if cmd.Operation == processOp {
			s.Kind = KindCopy // a changed checkout's conflict is the Go tests'; here, a copy
			break
		}
		cmd.Payload, _ = w.payload(cmd.Operation, cmd.IntentID, true)
	case KindKeyless:
		s.Op = operation.TypeInvoiceCreate
		return outgoing{s: s, subj: wire.CommandPrefix + s.Op, body: []byte("{not json " + msgID)}, nil
	case KindPoison:
		op := workloadOps[w.intn(len(workloadOps))]
		if op == operation.TypePaymentRefund {
			op = operation.TypePaymentCharge
		}
		intent := fmt.Sprintf("p%07d", n)
		cmd = operation.Command{EventID: msgID, Operation: op, IntentID: intent, ApprovalID: "appr-" + intent,
			Payload: json.RawMessage(`{"amount_minor":-5,"currency":"RUB"}`)}
		s.Op, s.Key = op, w.env+":"+op+":"+intent+":v1"
	default:
		op := otherOps[w.intn(len(otherOps))]
		if w.float() < w.crmShare {
			op = crmOps[w.intn(len(crmOps))]
		}
		if op == operation.TypePaymentRefund && !havePayments {
			op = operation.TypePaymentCharge
		}
		intent := fmt.Sprintf("i%07d", n)
		if w.float() < w.procShare {
			cmd = operation.Command{EventID: msgID, Operation: processOp, IntentID: intent, ApprovalID: "appr-" + intent,
				Payload: w.processInput(intent)}
			break
		}
		cmd = operation.Command{EventID: msgID, Operation: op, IntentID: intent}
		cmd.Payload, cmd.ApprovalID = w.payload(op, intent, false)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return outgoing{}, err
	}
	if cmd.Operation == processOp {
		// A checkout: its key as the daemons derive it (its input is the
		// daemons' to validate and fingerprint).
		s.Op, s.Key = processOp, processKey(w.env, cmd.IntentID)
		if s.Kind == KindFresh {
			w.mu.Lock()
			w.intents = append(w.intents, &intentSpec{cmd: cmd, key: s.Key})
			w.mu.Unlock()
		}
	} else if kind != KindPoison {
		op, err := w.dec.Decode(body)
		if err != nil {
			return outgoing{}, fmt.Errorf("workload built an invalid %s command: %w", kind, err)
		}
		s.Op, s.Key, s.Fingerprint = op.Type, op.Key.String(), op.Fingerprint
		s.NeedsApproval = gated(op)
		if kind == KindFresh {
			w.mu.Lock()
			w.intents = append(w.intents, &intentSpec{cmd: cmd, key: s.Key, fp: s.Fingerprint})
			w.mu.Unlock()
		}
	}
	return outgoing{s: s, subj: wire.CommandSubject(cmd.Operation), body: body}, nil
}

// run publishes at the rate until ctx ends, with publishers goroutines each
// retrying its message with the same Nats-Msg-Id until JetStream acks it.
func (w *workload) run(ctx context.Context, publishers int) error {
	queue := make(chan outgoing, 1<<20)
	var wg sync.WaitGroup
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range queue {
				w.publish(o)
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / w.rate)
	start := time.Now()
	var n int64
	var err error
	for ctx.Err() == nil {
		due := start.Add(time.Duration(n) * interval)
		if d := time.Until(due); d > 0 {
			if !ctxsleep.For(ctx, d) {
				break
			}
		}
		var o outgoing
		o, err = w.next()
		if err != nil {
			break
		}
		o.s.At = time.Now()
		w.mu.Lock()
		w.sent = append(w.sent, o.s)
		w.byMsg[o.s.MsgID] = o.s
		w.mu.Unlock()
		w.inflight.Add(1)
		queue <- o
		n++
	}
	close(queue)
	wg.Wait()
	return err
}

func (w *workload) publish(o outgoing) {
	defer w.inflight.Add(-1)
	m := nats.NewMsg(o.subj)
	m.Data = o.body
	m.Header.Set(wire.HeaderReplyTo, replySubject)
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := w.js.PublishMsg(ctx, m, jetstream.WithMsgID(o.s.MsgID))
		cancel()
		if err == nil {
			w.mu.Lock()
			o.s.Acked = time.Now()
			w.mu.Unlock()
			return
		}
		w.retries.Add(1)
		select { // the broker is down: the publisher's own backoff
		case <-time.After(backoff):
		case <-w.giveUp:
			return // never acked: not in the history
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// one publishes one new intent of op now, recorded as the workload records
// its own, and returns it once JetStream acknowledged it (Acked zero if the
// soak gave up first).
func (w *workload) one(op string) (Sent, error) {
	w.mu.Lock()
	w.seq++
	n := w.seq
	w.mu.Unlock()
	msgID, intent := fmt.Sprintf("m%07d", n), fmt.Sprintf("i%07d", n)
	cmd := operation.Command{EventID: msgID, Operation: op, IntentID: intent}
	cmd.Payload, cmd.ApprovalID = w.payload(op, intent, false)
	body, err := json.Marshal(cmd)
	if err != nil {
		return Sent{}, err
	}
	dec, err := w.dec.Decode(body)
	if err != nil {
		return Sent{}, fmt.Errorf("the soak built an invalid command: %w", err)
	}
	s := &Sent{MsgID: msgID, Key: dec.Key.String(), Op: op, Kind: KindFresh, Fingerprint: dec.Fingerprint, At: time.Now(), NeedsApproval: gated(dec)}
	w.mu.Lock()
	w.sent = append(w.sent, s)
	w.byMsg[msgID] = s
	w.mu.Unlock()
	w.inflight.Add(1)
	w.publish(outgoing{s: s, subj: wire.CommandPrefix + op, body: body})
	w.mu.Lock()
	defer w.mu.Unlock()
	return *s, nil
}

// gated reports whether the daemons' approval policy makes op wait for a
// person (setup.go: charges above approvalAbove).
func gated(op operation.Operation) bool {
	amount, _ := op.Fields["amount_minor"].(int64)
	return op.Type == operation.TypePaymentCharge && amount > approvalAbove
}

// onReply records a result received on the reply subject.
func (w *workload) onReply(m *nats.Msg) {
	var r operation.Result
	if json.Unmarshal(m.Data, &r) != nil || r.Status == operation.ResultPending {
		return
	}
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.byMsg[r.EventID]
	if s == nil || s.Reply != nil {
		return
	}
	s.Reply = &Reply{Status: string(r.Status), ObjectID: r.TargetObjectID, At: at}
	if s.Op == operation.TypePaymentCharge && r.Status == operation.ResultSucceeded && r.TargetObjectID != "" && s.Kind == KindFresh {
		w.payments = append(w.payments, r.TargetObjectID)
	}
}

// snapshot copies the sent messages.
func (w *workload) snapshot() []Sent {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Sent, 0, len(w.sent))
	for _, s := range w.sent {
		if !s.Acked.IsZero() {
			out = append(out, *s)
		}
	}
	return out
}
