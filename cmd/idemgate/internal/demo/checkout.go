package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/sandbox/onec"
	"github.com/idemgate/idemgate/sandbox/yookassa"
)

// CheckoutProcess is the demo's declared business process (its steps: an
// invoice in 1C, a charge in YooKassa, a shipping task in Bitrix24).
const CheckoutProcess = "order.checkout"

// checkoutScenario: a checkout runs its three steps, one effect each; a
// checkout whose charge is declined cancels its invoice (a cancelling
// document in 1C, once) and charges nothing; that checkout sent again is
// answered from the journal, nothing made twice.
func checkoutScenario(ctx context.Context, s *session, row *Row) error {
	sb := s.rt.Sandboxes
	oc, yk, bx := mark(sb.OneC), mark(sb.YooKassa), mark(sb.Bitrix24)
	op := process.OperationPrefix + CheckoutProcess
	input := func(order, account string) map[string]any {
		return map[string]any{"order_id": order, "customer_id": "cust-7", "account_id": account,
			"amount_minor": 125000, "currency": "RUB", "responsible_id": "12"}
	}
	row.Intents = 2

	ok := s.intent(op, "checkout-ok", input("order-48301", "merchant-account-17"))
	s.p.step("agent: check out order-48301 (%s: invoice → charge → shipping task)", CheckoutProcess)
	_, res, err := s.send(ctx, row, ok, "checkout-ok-1", "checkout")
	if err != nil {
		return err
	}
	okView, err := viewOf(res[eventFor(s, "checkout-ok-1")])
	if err != nil {
		return err
	}
	made := [3]int{len(oc.since()), len(yk.since()), len(bx.since())}
	row.check("a checkout makes each step once", okView.Status == "succeeded" && made == [3]int{1, 1, 1},
		"process %s; 1C %d, YooKassa %d, Bitrix24 %d effect(s)", okView.Status, made[0], made[1], made[2])

	onec2, yk2, bx2 := mark(sb.OneC), mark(sb.YooKassa), mark(sb.Bitrix24)
	declined := s.intent(op, "checkout-declined", input("order-48302", yookassa.MethodDeclined))
	s.p.step("agent: check out order-48302, whose card the bank declines")
	_, res, err = s.send(ctx, row, declined, "checkout-declined-1", "checkout")
	if err != nil {
		return err
	}
	dv, err := viewOf(res[eventFor(s, "checkout-declined-1")])
	if err != nil {
		return err
	}
	cancelled := 0
	for _, e := range onec2.since() {
		if e.Kind == onec.EffectInvoiceCancel {
			cancelled++
		}
	}
	refunds := 0
	for _, e := range yk2.since() {
		if e.Kind == "refund" {
			refunds++
		}
	}
	made = [3]int{len(onec2.since()), len(yk2.since()), len(bx2.since())}
	// The bank's decline is a payment YooKassa keeps as canceled: one
	// object, no money moved, nothing to refund.
	row.check("a declined charge compensates: the invoice is cancelled once, nothing charged, refunded or shipped",
		dv.Status == "compensated" && dv.FailedStep == "charge" && made == [3]int{2, 1, 0} && cancelled == 1 && refunds == 0,
		"process %s after step %s failed; 1C %d effect(s) (the invoice and its cancellation), YooKassa %d (the declined payment, canceled; %d refunds), Bitrix24 %d",
		dv.Status, dv.FailedStep, made[0], made[1], refunds, made[2])

	before := [3]int{len(oc.since()), len(yk.since()), len(bx.since())}
	_, again, err := s.send(ctx, row, declined, "checkout-declined-2", "checkout again")
	if err != nil {
		return err
	}
	r := again[eventFor(s, "checkout-declined-2")]
	after := [3]int{len(oc.since()), len(yk.since()), len(bx.since())}
	s.p.step("agent sends the declined checkout again: answered %s (replayed %v)", r.Status, r.Replayed)
	row.check("the process sent again is answered from the journal", r.Replayed && before == after,
		"replayed %v; effects before %v, after %v", r.Replayed, before, after)
	row.Effects = after[0] + after[1] + after[2]
	if r.Replayed {
		row.Replays++
	}
	row.note("a process's effects are its steps' and compensations': %d for 2 checkouts (3, then the invoice, the declined payment and the invoice's cancellation)", row.Effects)
	return nil
}

// eventFor is the event id the session gives a command named name.
func eventFor(s *session, name string) string { return "evt-" + s.runID + "-" + name }

// viewOf reads a process result's state.
func viewOf(r operation.Result) (process.View, error) {
	var v process.View
	if err := json.Unmarshal(r.Result, &v); err != nil {
		return v, fmt.Errorf("process result %s: %w", r.Status, err)
	}
	return v, nil
}

// checkoutKilledScenario: the coordinator running a checkout stops dead
// once the charge has settled — its process lease held, its command
// neither acknowledged nor returned, as a killed daemon leaves them. The
// command comes back after nats.ack_wait; the coordinator that takes it
// takes the process over once its lease has run out (a new fencing
// token), finds the invoice and the charge settled in the journal, and
// goes on with the shipping step: each step made once.
func checkoutKilledScenario(ctx context.Context, s *session, row *Row) error {
	sb := s.rt.Sandboxes
	oc, yk, bx := mark(sb.OneC), mark(sb.YooKassa), mark(sb.Bitrix24)
	op := process.OperationPrefix + CheckoutProcess
	in := s.intent(op, "checkout-killed", map[string]any{"order_id": "order-48303", "customer_id": "cust-7",
		"account_id": "merchant-account-17", "amount_minor": 125000, "currency": "RUB", "responsible_id": "12"})
	row.Intents = 1
	key := in.key(s.rt.Env)
	stopped := s.rt.StopCoordinatorAt(key, "charge")
	s.p.step("agent: check out order-48303; its coordinator will be stopped dead once the charge has settled")
	started := time.Now()
	_, res, err := s.send(ctx, row, in, "checkout-killed-1", "checkout, its coordinator stopped and taken over")
	if err != nil {
		return err
	}
	died := false
	select {
	case <-stopped:
		died = true
	default:
	}
	s.p.step("daemon: the coordinator stopped after the charge (lease held, command unacknowledged); the command came back, the process was taken over and resumed: %s after %v",
		res[eventFor(s, "checkout-killed-1")].Status, time.Since(started).Round(100*time.Millisecond))
	v, err := viewOf(res[eventFor(s, "checkout-killed-1")])
	if err != nil {
		return err
	}
	token := int64(0)
	if ps, ok := s.rt.Journal.(journal.ProcessStore); ok {
		if rec, err := ps.GetProcess(ctx, key); err == nil {
			token = rec.LeaseToken
		}
	}
	made := [3]int{len(oc.since()), len(yk.since()), len(bx.since())}
	row.check("the coordinator stopped dead mid-process", died, "stopped after the charge settled: %v", died)
	row.check("the process was taken over and resumed, each step made once", v.Status == "succeeded" && made == [3]int{1, 1, 1} && token >= 2,
		"process %s under lease token %d; 1C %d, YooKassa %d, Bitrix24 %d effect(s)", v.Status, token, made[0], made[1], made[2])
	row.Effects = made[0] + made[1] + made[2]
	row.note("a process's progress is in the journal: the coordinator that takes it over resumes at the step the journal names and sends nothing twice")
	return nil
}
