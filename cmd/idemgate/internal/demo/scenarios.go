package demo

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
)

// scenario is one scripted part of the demo.
type scenario struct {
	id, name, target, op        string
	needsReplica, needsApproval bool
	// needsStop: the scenario stops a coordinator dead (Runtime.StopCoordinatorAt).
	needsStop bool
	run       func(ctx context.Context, s *session, row *Row) error
}

// Operation types the scenarios send.
const (
	opCharge  = operation.TypePaymentCharge
	opInvoice = operation.TypeInvoiceCreate
	opTask    = operation.TypeTaskCreate
)

var scenarios = []scenario{
	{id: "payment-duplicates", name: "payment: duplicates and retries", target: "yookassa", op: opCharge, run: paymentDuplicates},
	{id: "payment-lost-response", name: "payment: lost response reconciled", target: "yookassa", op: opCharge, run: paymentLostResponse},
	{id: "payment-conflict", name: "payment: same key, other payload", target: "yookassa", op: opCharge, run: paymentConflict},
	{id: "payment-faults", name: "payment: 503, then 429 with Retry-After", target: "yookassa", op: opCharge, run: paymentFaults},
	{id: "invoice", name: "invoice (1C): 500 after posting, retry", target: "onec", op: opInvoice, run: invoiceScenario},
	{id: "crm-task", name: "CRM task (Bitrix24): duplicates, rate limit", target: "bitrix24", op: opTask, run: crmTaskScenario},
	{id: "replicas", name: "two replicas racing", target: "yookassa", op: opCharge, needsReplica: true, run: replicasRacing},
	{id: "mcp-agent", name: "an agent through MCP", target: "yookassa", op: opCharge, run: mcpAgent},
	{id: "checkout", name: "checkout: a declined charge cancels the invoice", target: "onec+yookassa+bitrix24", op: opInvoice, run: checkoutScenario},
	{id: "checkout-killed", name: "checkout: its coordinator stopped dead mid-process", target: "onec+yookassa+bitrix24", op: opInvoice, needsStop: true, run: checkoutKilledScenario},
	{id: "approval", name: "a charge waits for a person", target: "yookassa", op: opCharge, needsApproval: true, run: chargeWaitsForAPerson},
}

func chargePayload(order string, minor int64) map[string]any {
	return map[string]any{"account_id": "merchant-account-17", "order_id": order, "amount_minor": minor, "currency": "rub"}
}

func rub(minor int64) string { return fmt.Sprintf("%d.%02d RUB", minor/100, minor%100) }

// eventIDs lists the event ids of commands.
func eventIDs(cmds ...operation.Command) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.EventID
	}
	return out
}

// sameOutcome checks that every result succeeded with one object id.
func sameOutcome(results map[string]operation.Result, ids []string) (string, error) {
	var object string
	for _, id := range ids {
		r, ok := results[id]
		switch {
		case !ok:
			return "", fmt.Errorf("no result for %s", id)
		case r.Status != operation.ResultSucceeded:
			return "", fmt.Errorf("%s ended %s %s", id, r.Status, r.ErrorCode)
		case r.TargetObjectID == "":
			return "", fmt.Errorf("%s succeeded without an object id", id)
		case object == "":
			object = r.TargetObjectID
		case r.TargetObjectID != object:
			return "", fmt.Errorf("%s got object %s, another copy got %s", id, r.TargetObjectID, object)
		}
	}
	return object, nil
}

func merge(into map[string]operation.Result, from map[string]operation.Result) {
	for k, v := range from {
		into[k] = v
	}
}

// inject adds faults to a target, tells what they do (what, on the
// progress line), and returns what removes what is left of them when the
// scenario ends.
func (s *session) inject(t sandbox.Target, what string, faults ...sandbox.Fault) (func(), error) {
	for _, f := range faults {
		if err := t.InjectFault(f); err != nil {
			t.ClearFaults()
			return func() {}, fmt.Errorf("inject %s into %s: %w", f.Kind, t.Name(), err)
		}
	}
	s.p.step("sandbox: %s", what)
	return t.ClearFaults, nil
}

// paymentDuplicates: the agent's client re-sends one event (JetStream drops
// it), then the agent retries the intent under new event ids (the journal
// replays the stored outcome).
func paymentDuplicates(ctx context.Context, s *session, row *Row) error {
	y := s.rt.Sandboxes.YooKassa
	m := mark(y)
	in := s.intent(opCharge, "charge-dup", chargePayload("order-48291", 125000))
	row.Intents = 1
	s.p.step("agent: charge %s for order-48291 (intent %s)", rub(125000), in.id)
	first, results, err := s.send(ctx, row, in, "charge-dup-1", "charge")
	if err != nil {
		return err
	}
	dropped := 0
	for range 2 {
		dup, err := s.publish(ctx, row, first)
		if err != nil {
			return err
		}
		if dup {
			dropped++
		}
	}
	s.p.step("agent's client re-sends the same event twice: the stream's duplicate window dropped %d", dropped)
	retries := make([]operation.Command, 0, 2)
	for i := range 2 {
		c, err := s.command(in, fmt.Sprintf("charge-dup-retry-%d", i+1))
		if err != nil {
			return err
		}
		retries = append(retries, c)
		if _, err := s.publish(ctx, row, c); err != nil {
			return err
		}
	}
	s.p.step("agent retries the intent twice under new event ids (its own timeout, a restarted orchestrator)")
	more, err := s.await(ctx, "retries", eventIDs(retries...))
	if err != nil {
		return err
	}
	merge(results, more)
	tally(row, results)
	judgeEffects(row, m, row.Intents)
	row.check("same-event duplicates dropped before any work", dropped == 2, "%d of 2 re-sent events were JetStream duplicates", dropped)
	object, err := sameOutcome(results, eventIDs(first, retries[0], retries[1]))
	replayed := 0
	for _, c := range retries {
		if results[c.EventID].Replayed {
			replayed++
		}
	}
	row.check("retries answered with the stored outcome", err == nil && replayed == 2,
		"payment %s for all 3 commands, %d of 2 retries replayed%s", object, replayed, errSuffix(err))
	return nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return "; " + err.Error()
}

// paymentLostResponse: YooKassa creates the payment, and the connection
// closes before the answer. The outcome is unknown: idemgate looks the
// payment up by key before any retry.
func paymentLostResponse(ctx context.Context, s *session, row *Row) error {
	y := s.rt.Sandboxes.YooKassa
	m := mark(y)
	cleanup, err := s.inject(y, "the next payment is created, then the connection closes before the answer",
		sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Scope: sandbox.ScopeCreate, Count: 1})
	if err != nil {
		return err
	}
	defer cleanup()
	cmd, results, atts, err := s.chargeOnce(ctx, row, "charge-lost", "order-48292", 99000)
	if err != nil {
		return err
	}
	executes, reconciled := countKinds(atts)
	row.Reconciled = reconciled
	pending := s.col.pending(cmd.EventID)
	s.p.step("agent saw %d pending answer(s) while the outcome was unknown", pending)
	tally(row, results)
	judgeEffects(row, m, row.Intents)
	r := results[cmd.EventID]
	row.check("unknown outcome looked up by key, never retried blindly",
		r.Status == operation.ResultSucceeded && executes == 1 && reconciled == 1,
		"%d call to YooKassa, %d reconciliation by lookup, final status %s (payment %s)", executes, reconciled, r.Status, r.TargetObjectID)
	return nil
}

// paymentConflict: the same intent comes back with another amount.
func paymentConflict(ctx context.Context, s *session, row *Row) error {
	y := s.rt.Sandboxes.YooKassa
	m := mark(y)
	in := s.intent(opCharge, "charge-conflict", chargePayload("order-48293", 50000))
	row.Intents = 1
	s.p.step("agent: charge %s for order-48293", rub(50000))
	first, results, err := s.send(ctx, row, in, "charge-conflict-1", "charge")
	if err != nil {
		return err
	}
	changed := in
	changed.payload = chargePayload("order-48293", 500000)
	s.p.step("agent: the same intent again, now for %s (a bug, or a tampered retry)", rub(500000))
	second, more, err := s.send(ctx, row, changed, "charge-conflict-2", "conflict")
	if err != nil {
		return err
	}
	merge(results, more)
	tally(row, results)
	judgeEffects(row, m, row.Intents)
	r1, r2 := results[first.EventID], results[second.EventID]
	row.check("a key reused with another payload is refused, nothing executed",
		r1.Status == operation.ResultSucceeded && r2.Status == operation.ResultConflict && r2.ErrorCode == adapters.CodeKeyPayloadMismatch,
		"first %s, second %s (%s)", r1.Status, r2.Status, r2.ErrorCode)
	return nil
}

// paymentFaults: YooKassa answers 503, then 429 with Retry-After: 1, then
// takes the payment. Both failures are "retry" class: nothing was created.
func paymentFaults(ctx context.Context, s *session, row *Row) error {
	y := s.rt.Sandboxes.YooKassa
	m := mark(y)
	const retryAfter = time.Second
	cleanup, err := s.inject(y, "the next payment request gets 503, the one after 429 with Retry-After: 1",
		sandbox.Fault{Kind: sandbox.FaultHTTP503, Scope: sandbox.ScopeCreate, Count: 1},
		sandbox.Fault{Kind: sandbox.FaultHTTP429, Scope: sandbox.ScopeCreate, Count: 1, RetryAfter: retryAfter})
	if err != nil {
		return err
	}
	defer cleanup()
	cmd, results, atts, err := s.chargeOnce(ctx, row, "charge-faults", "order-48294", 31000)
	if err != nil {
		return err
	}
	tally(row, results)
	judgeEffects(row, m, row.Intents)
	executes, _ := countKinds(atts)
	r := results[cmd.EventID]
	row.check("transient failures retried with the same key until success",
		r.Status == operation.ResultSucceeded && executes == 3,
		"%d calls (503, 429, success), final status %s, %d attempts reported", executes, r.Status, r.Attempts)
	gap, ok := retryGap(atts, 2)
	row.check("Retry-After honoured", ok && gap >= retryAfter-50*time.Millisecond,
		"third call %s after the 429 (asked: %s)", gap.Round(10*time.Millisecond), retryAfter)
	return nil
}

// retryGap is the time between the end of call n (1-based) and the start of
// call n+1, by the journal's clock.
func retryGap(atts []journal.Attempt, n int) (time.Duration, bool) {
	var calls []journal.Attempt
	for _, a := range atts {
		if a.Kind == "execute" {
			calls = append(calls, a)
		}
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].Attempt < calls[j].Attempt })
	if len(calls) <= n {
		return 0, false
	}
	end := calls[n-1].FinishedAt
	if end.IsZero() {
		end = calls[n-1].StartedAt
	}
	return calls[n].StartedAt.Sub(end), true
}

// replicasRacing: a second replica joins the shared consumer; eight intents
// are sent three times each at once while YooKassa answers slowly, so the
// copies of one intent land on both replicas at the same time.
func replicasRacing(ctx context.Context, s *session, row *Row) error {
	y := s.rt.Sandboxes.YooKassa
	const owner2 = "demo-replica-2"
	s.p.step("starting a second replica (%s) on the same journal and consumer", owner2)
	stop, err := s.rt.StartReplica(ctx, owner2)
	if err != nil {
		return fmt.Errorf("start the second replica: %w", err)
	}
	var stopErr error
	defer func() {
		if stopErr == nil {
			stopErr = stop()
		}
	}()
	m := mark(y)
	cleanup, err := s.inject(y, "every payment takes 250ms, so copies overlap",
		sandbox.Fault{Kind: sandbox.FaultDelay, Scope: sandbox.ScopeCreate, Delay: 250 * time.Millisecond})
	if err != nil {
		return err
	}
	defer cleanup()
	const intents, copies = 8, 3
	row.Intents = intents
	var cmds []operation.Command
	byIntent := map[string][]string{}
	for c := range copies {
		for i := range intents {
			in := s.intent(opCharge, fmt.Sprintf("charge-race-%d", i+1), chargePayload(fmt.Sprintf("order-5%04d", i+1), int64(10000*(i+1))))
			cmd, err := s.command(in, fmt.Sprintf("charge-race-%d-copy-%d", i+1, c+1))
			if err != nil {
				return err
			}
			cmds = append(cmds, cmd)
			byIntent[in.id] = append(byIntent[in.id], cmd.EventID)
		}
	}
	s.p.step("agent: %d intents × %d copies, all at once", intents, copies)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var pubErr error
	for _, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.prod.Publish(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && pubErr == nil {
				pubErr = err
			}
		}()
	}
	wg.Wait()
	if pubErr != nil {
		return pubErr
	}
	row.Sent = len(cmds)
	results, err := s.await(ctx, "race", eventIDs(cmds...))
	if err != nil {
		return err
	}
	cleanup()
	tally(row, results)
	judgeEffects(row, m, intents)
	var bad []string
	pending := 0
	owners := map[string]int{}
	ids := make([]string, 0, len(byIntent))
	for id := range byIntent {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, err := sameOutcome(results, byIntent[id]); err != nil {
			bad = append(bad, err.Error())
		}
		for _, ev := range byIntent[id] {
			pending += s.col.pending(ev)
		}
		key := operation.Key{Env: s.rt.Env, Operation: opCharge, IntentID: id, Version: operation.DefaultKeyVersion}.String()
		atts, err := s.attempts(ctx, key)
		if err != nil {
			return err
		}
		for _, a := range atts {
			if a.Kind == "execute" {
				owners[a.Worker]++
			}
		}
	}
	row.check("every copy of an intent got the same outcome", len(bad) == 0,
		"%d commands, %d intents, one payment id per intent%s", len(cmds), intents, errSuffix(joinErrs(bad)))
	var who []string
	for o, n := range owners {
		who = append(who, fmt.Sprintf("%s called YooKassa %d×", o, n))
	}
	sort.Strings(who)
	row.note("%s; %d deliveries found their intent in progress on the other replica or a sibling and answered pending",
		strings.Join(who, ", "), pending)
	if len(owners) < 2 {
		row.note("only one replica fetched work this time; the guarantee is the same either way")
	}
	if !s.rt.MultiMachine {
		row.note("both replicas run in this process on one SQLite journal; replicas on several machines need PostgreSQL (journal.url) and a NATS cluster (nats.url)")
	}
	stopErr = stop()
	if stopErr != nil {
		return fmt.Errorf("stop the second replica: %w", stopErr)
	}
	return nil
}

func joinErrs(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// invoiceScenario: an invoice in 1C; 1C posts it and then answers 500 (its
// "-1" from a failing handler); idemgate finds the invoice by key; a retry
// of the intent replays it.
func invoiceScenario(ctx context.Context, s *session, row *Row) error {
	o := s.rt.Sandboxes.OneC
	m := mark(o)
	cleanup, err := s.inject(o, "1C will post the next invoice, then answer 500",
		sandbox.Fault{Kind: sandbox.FaultHTTP500AfterCommit, Scope: sandbox.ScopeCreate, Count: 1})
	if err != nil {
		return err
	}
	defer cleanup()
	in := s.intent(opInvoice, "invoice", map[string]any{
		"order_id": "order-48291", "customer_id": "cust-7", "amount_minor": 125000, "currency": "rub",
		"due_date": "2030-01-31", "description": "Подписка, январь",
	})
	row.Intents = 1
	s.p.step("agent: create an invoice for order-48291, %s", rub(125000))
	first, results, err := s.send(ctx, row, in, "invoice-1", "invoice")
	if err != nil {
		return err
	}
	s.p.step("agent retries the intent (it never saw the first answer)")
	retry, more, err := s.send(ctx, row, in, "invoice-retry", "retry")
	if err != nil {
		return err
	}
	merge(results, more)
	atts, err := s.attempts(ctx, in.key(s.rt.Env))
	if err != nil {
		return err
	}
	executes, reconciled := countKinds(atts)
	row.Reconciled = reconciled
	tally(row, results)
	judgeEffects(row, m, row.Intents)
	object, err := sameOutcome(results, eventIDs(first, retry))
	row.check("500 after posting reconciled by key, not posted twice", err == nil && executes == 1 && reconciled == 1,
		"%d call to 1C, %d reconciliation, invoice %s%s", executes, reconciled, object, errSuffix(err))
	row.check("the retry replayed the stored invoice", results[retry.EventID].Replayed, "replayed: %v", results[retry.EventID].Replayed)
	return nil
}

// crmTaskScenario: two CRM tasks, each sent twice at once, while Bitrix24's
// limiter refuses the first add (503 QUERY_LIMIT_EXCEEDED).
func crmTaskScenario(ctx context.Context, s *session, row *Row) error {
	b := s.rt.Sandboxes.Bitrix24
	m := mark(b)
	cleanup, err := s.inject(b, "Bitrix24 refuses the next add with 503 QUERY_LIMIT_EXCEEDED",
		sandbox.Fault{Kind: sandbox.FaultHTTP503, Scope: sandbox.ScopeCreate, Count: 1})
	if err != nil {
		return err
	}
	defer cleanup()
	titles := []string{"Call the customer about invoice 48291", "Send the signed contract"}
	row.Intents = len(titles)
	var cmds []operation.Command
	byIntent := map[string][]string{}
	for i, title := range titles {
		in := s.intent(opTask, fmt.Sprintf("task-%d", i+1), map[string]any{
			"title": title, "responsible_id": "1", "deadline": "2030-01-15T10:00:00+03:00",
		})
		for c := range 2 {
			cmd, err := s.command(in, fmt.Sprintf("task-%d-copy-%d", i+1, c+1))
			if err != nil {
				return err
			}
			cmds = append(cmds, cmd)
			byIntent[in.id] = append(byIntent[in.id], cmd.EventID)
		}
	}
	s.p.step("agent: %d tasks, each sent twice (an orchestrator retry racing the first send)", len(titles))
	for _, c := range cmds {
		if _, err := s.publish(ctx, row, c); err != nil {
			return err
		}
	}
	results, err := s.await(ctx, "tasks", eventIDs(cmds...))
	if err != nil {
		return err
	}
	tally(row, results)
	judgeEffects(row, m, row.Intents)
	var bad []string
	for _, ids := range byIntent {
		if _, err := sameOutcome(results, ids); err != nil {
			bad = append(bad, err.Error())
		}
	}
	sort.Strings(bad)
	row.check("both copies of each task got the same activity", len(bad) == 0, "%d commands, %d tasks%s",
		len(cmds), len(titles), errSuffix(joinErrs(bad)))
	return nil
}

// chargeOnce sends one intent, name, to charge minor units for order as
// the event <name>-1, and returns what sendOne does.
func (s *session) chargeOnce(ctx context.Context, row *Row, name, order string, minor int64) (operation.Command, map[string]operation.Result, []journal.Attempt, error) {
	in := s.intent(opCharge, name, chargePayload(order, minor))
	row.Intents = 1
	s.p.step("agent: charge %s for %s", rub(minor), order)
	return s.sendOne(ctx, row, in, name+"-1")
}

// sendOne publishes one command for an intent, waits for its final result
// and reads the intent's attempts trail.
func (s *session) sendOne(ctx context.Context, row *Row, in intent, eventID string) (operation.Command, map[string]operation.Result, []journal.Attempt, error) {
	cmd, results, err := s.send(ctx, row, in, eventID, "charge")
	if err != nil {
		return cmd, nil, nil, err
	}
	atts, err := s.attempts(ctx, in.key(s.rt.Env))
	return cmd, results, atts, err
}

// send publishes one command for an intent and waits for its final result;
// label names the wait on the progress line.
func (s *session) send(ctx context.Context, row *Row, in intent, eventID, label string) (operation.Command, map[string]operation.Result, error) {
	cmd, err := s.command(in, eventID)
	if err != nil {
		return cmd, nil, err
	}
	if _, err := s.publish(ctx, row, cmd); err != nil {
		return cmd, nil, err
	}
	results, err := s.await(ctx, label, eventIDs(cmd))
	return cmd, results, err
}
