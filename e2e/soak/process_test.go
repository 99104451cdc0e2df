package main

import (
	"slices"
	"testing"

	"github.com/idemgate/idemgate/adapters"
)

// checkout adds to h one checkout sent twice that ended in status (failed
// at failed), with an effect for each step and compensation in made; each
// step's and compensation's row and result as the daemons write them.
func checkout(h *History, intent, status, failed string, made ...string) string {
	pk := processKey("soak", intent)
	reply := "failed_final"
	if status == "succeeded" {
		reply = "succeeded"
	}
	h.Sent = append(h.Sent,
		Sent{MsgID: "p1-" + intent, Key: pk, Op: processOp, Kind: KindFresh, At: at(10), Acked: at(10.01)},
		Sent{MsgID: "p2-" + intent, Key: pk, Op: processOp, Kind: KindCopy, At: at(11), Acked: at(11.01),
			Reply: &Reply{Status: reply, At: at(20)}})
	h.Results = append(h.Results, ResultMsg{Key: pk, EventID: "p1-" + intent, Status: "pending", At: at(12)})
	h.Processes = append(h.Processes, ProcessRow{Key: pk, Status: status, FailedStep: failed})
	for _, k := range keysOf(pk) {
		name := k.step
		if k.comp {
			name += "/compensate"
		}
		if !slices.Contains(made, name) {
			if name == failed {
				h.Rows = append(h.Rows, Row{Key: k.process, Status: "failed_final", RequestHash: "h-" + name, Token: 1})
				h.Attempts = append(h.Attempts, Attempt{Key: k.process, Attempt: 1, Token: 1, Worker: "r1", Kind: "execute",
					Started: at(13), Finished: at(13.5), Outcome: "failed_final"})
			}
			continue
		}
		obj := "obj-" + intent + "-" + name
		// The target holds the key as its adapter sent it (a digest past
		// its length limit).
		h.Effects = append(h.Effects, Effect{Target: k.target, Key: adapters.TargetKey(k.process, targetMaxKey[k.target]), ObjectID: obj, At: at(13)})
		h.Rows = append(h.Rows, Row{Key: k.process, Status: "succeeded", ObjectID: obj, RequestHash: "h-" + name, Token: 1})
		h.Results = append(h.Results, ResultMsg{Key: k.process, EventID: k.process, Status: "succeeded", ObjectID: obj, At: at(14)})
		h.Attempts = append(h.Attempts, Attempt{Key: k.process, Attempt: 1, Token: 1, Worker: "r1", Kind: "execute",
			Started: at(12.5), Finished: at(13.5), Outcome: "succeeded"})
	}
	return pk
}

// TestCheckProcesses: a checkout that went through, one whose charge was
// declined (invoice cancelled) and one whose shipping was refused (charge
// refunded, invoice cancelled) pass; each way a process can go wrong
// breaches process_effects or process_settled.
func TestCheckProcesses(t *testing.T) {
	good := func() History {
		h := healthy()
		checkout(&h, "c1", "succeeded", "", "invoice", "charge", "shipping")
		checkout(&h, "c2", "compensated", "charge", "invoice", "invoice/compensate")
		checkout(&h, "c3", "compensated", "shipping", "invoice", "charge", "charge/compensate", "invoice/compensate")
		return h
	}
	// A declined charge: YooKassa keeps a canceled payment under its key
	// (a refusal, no money moved).
	declined := good()
	pk := checkout(&declined, "c5", "compensated", "charge", "invoice", "invoice/compensate")
	k := keysOf(pk)[2]
	declined.Effects = append(declined.Effects, Effect{Target: k.target, Key: adapters.TargetKey(k.process, 64), ObjectID: "pay-c5",
		Kind: "payment_canceled", At: at(13)})
	if rep := Check(declined, nil); !rep.Pass {
		t.Fatalf("a declined charge's canceled payment failed the check: %v\n%s", rep.Breached, summary(rep))
	}
	rep := Check(good(), nil)
	if !rep.Pass {
		t.Fatalf("healthy processes failed: %v\n%s", rep.Breached, summary(rep))
	}
	if rep.Counts.Processes != 3 || rep.Counts.ProcessFinal["compensated"] != 2 || rep.Counts.ProcessFinal["succeeded"] != 1 {
		t.Errorf("counts = %+v", rep.Counts)
	}
	if long := keysOf(processKey("soak", "c3"))[3].process; adapters.TargetKey(long, 64) == long {
		t.Fatalf("the refund's key %q fits YooKassa's limit: the digest path is not tested", long)
	}

	for _, tc := range []struct {
		name string
		bad  func(h *History)
		inv  string
	}{
		{"a charge made twice", func(h *History) {
			e := h.Effects[len(h.Effects)-1]
			for _, x := range h.Effects {
				if x.ObjectID == "obj-c1-charge" {
					e = x
				}
			}
			e.ObjectID += "-again"
			h.Effects = append(h.Effects, e)
		}, InvProcessEffects},
		{"a compensated process whose failed charge holds a payment", func(h *History) {
			pk := checkout(h, "c4", "compensated", "charge", "invoice", "invoice/compensate")
			k := keysOf(pk)[2]
			h.Effects = append(h.Effects, Effect{Target: k.target, Key: adapters.TargetKey(k.process, 64), ObjectID: "pay-c4", Kind: "payment", At: at(13)})
		}, InvProcessEffects},
		{"a compensated process whose unknown charge stood (compensated without a lookup)", func(h *History) {
			checkout(h, "c4", "compensated", "charge", "invoice", "charge", "invoice/compensate")
		}, InvProcessEffects},
		{"a charge not refunded", func(h *History) {
			checkout(h, "c4", "compensated", "shipping", "invoice", "charge", "invoice/compensate")
		}, InvProcessEffects},
		{"a refund without a charge", func(h *History) {
			checkout(h, "c4", "compensated", "charge", "invoice", "invoice/compensate", "charge/compensate")
		}, InvProcessEffects},
		{"succeeded without its shipping", func(h *History) {
			checkout(h, "c4", "succeeded", "", "invoice", "charge")
		}, InvProcessEffects},
		{"still running after settling", func(h *History) {
			checkout(h, "c4", "running", "", "invoice")
		}, InvProcessSettled},
		{"no record", func(h *History) {
			checkout(h, "c4", "succeeded", "", "invoice", "charge", "shipping")
			h.Processes = h.Processes[:len(h.Processes)-1]
		}, InvProcessSettled},
		{"at rest, never answered", func(h *History) {
			checkout(h, "c4", "succeeded", "", "invoice", "charge", "shipping")
			h.Sent[len(h.Sent)-1].Reply = nil
		}, InvProcessSettled},
		{"a step effect of a process never sent", func(h *History) {
			k := keysOf(processKey("soak", "c9"))[0]
			h.Effects = append(h.Effects, Effect{Target: k.target, Key: k.process, ObjectID: "stray", At: at(30)})
		}, InvPhantom},
	} {
		h := good()
		tc.bad(&h)
		rep := Check(h, nil)
		if rep.Pass || !slices.Contains(rep.Breached, tc.inv) {
			t.Errorf("%s: breached %v, want %s", tc.name, rep.Breached, tc.inv)
		}
	}
}
