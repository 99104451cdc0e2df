package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/operation"
)

// chargeWaitsForAPerson: a charge above the approval threshold waits. The
// agent is told await_approval (with where a person decides), retries the
// same intent meanwhile and is told the same; nothing reaches the payment
// provider. A person approves; the charge executes once, and the agent's
// next call is answered from the journal.
func chargeWaitsForAPerson(ctx context.Context, s *session, row *Row) error {
	y := s.rt.Sandboxes.YooKassa
	m := mark(y)
	amount := s.rt.ApprovalAbove + 2_500_000 // 25,000.00 RUB above the threshold
	in := s.intent(opCharge, "charge-approval", chargePayload("order-48297", amount))
	row.Intents = 1
	s.p.step("agent: charge %s for order-48297; the policy: a person approves charges above %s", rub(amount), rub(s.rt.ApprovalAbove))
	first, err := s.command(in, "charge-approval-1")
	if err != nil {
		return err
	}
	if _, err := s.publish(ctx, row, first); err != nil {
		return err
	}
	wait, err := s.awaitApproval(ctx, first.EventID)
	if err != nil {
		return err
	}
	link := "no console link configured"
	if wait.Approval != nil && wait.Approval.URL != "" {
		link = wait.Approval.URL
	}
	s.p.step("agent is told: pending, next action %s (%s)", wait.NextAction, link)
	retry, err := s.command(in, "charge-approval-2")
	if err != nil {
		return err
	}
	if _, err := s.publish(ctx, row, retry); err != nil {
		return err
	}
	again, err := s.awaitApproval(ctx, retry.EventID)
	if err != nil {
		return err
	}
	s.p.step("agent retries the same intent while it waits: told %s again", again.NextAction)
	before := len(m.since())
	row.check("nothing charged while the intent waits", before == 0, "%d payment(s) in YooKassa before the decision", before)

	key := in.key(s.rt.Env)
	if err := s.rt.Approve(ctx, key, "demo-approver", "order 48297 confirmed with the customer"); err != nil {
		return fmt.Errorf("approve %s: %w", key, err)
	}
	s.p.step("a person (demo-approver) approves %s: the decision is bound to the request's fingerprint", key)
	poll, err := s.command(in, "charge-approval-3")
	if err != nil {
		return err
	}
	if _, err := s.publish(ctx, row, poll); err != nil {
		return err
	}
	// The parked command (the latest copy, the retry) is answered when the
	// daemon carries the decision out; the agent's poll is answered too.
	results, err := s.await(ctx, "charge after approval", eventIDs(retry, poll))
	if err != nil {
		return err
	}
	tally(row, results)
	judgeEffects(row, m, row.Intents)
	object, err := sameOutcome(results, eventIDs(retry, poll))
	row.check("approved once, charged once", err == nil && len(m.since()) == 1,
		"payment %s after the approval, %d in YooKassa%s", object, len(m.since()), errSuffix(err))
	return nil
}

// awaitApproval waits for a pending answer of eventID that says the intent
// waits for a person.
func (s *session) awaitApproval(ctx context.Context, eventID string) (operation.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		s.col.mu.Lock()
		changed := s.col.changed
		for _, r := range s.col.byEvent[eventID] {
			if r.Status == operation.ResultPending && r.NextAction == "await_approval" {
				s.col.mu.Unlock()
				return r, nil
			}
			if r.Status != operation.ResultPending {
				s.col.mu.Unlock()
				return r, fmt.Errorf("%s ended %s %s before any approval", eventID, r.Status, r.ErrorCode)
			}
		}
		s.col.mu.Unlock()
		s.p.waiting("the answer to "+eventID, 0, 1)
		select {
		case <-changed:
		case <-time.After(120 * time.Millisecond):
		case <-ctx.Done():
			return operation.Result{}, fmt.Errorf("no await_approval answer for %s: %w", eventID, context.Cause(ctx))
		}
	}
}
