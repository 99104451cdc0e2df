package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// healthy is a small history where every guarantee holds: one intent sent
// twice (a copy), executed once after an unknown outcome was looked up; one
// conflicting copy of it refused; one poison command rejected; one intent
// that failed finally without an effect.
func healthy() History {
	const k1, k2, kp = "soak:invoice.create:i1:v1", "soak:payment.charge:i2:v1", "soak:payment.charge:p3:v1"
	return History{
		Sent: []Sent{
			{MsgID: "m1", Key: k1, Op: "invoice.create", Kind: KindFresh, Fingerprint: "fa", At: at(0), Acked: at(0.01),
				Reply: &Reply{Status: "succeeded", ObjectID: "inv-1", At: at(3)}},
			{MsgID: "m2", Key: k1, Op: "invoice.create", Kind: KindCopy, Fingerprint: "fa", At: at(1), Acked: at(1.01),
				Reply: &Reply{Status: "succeeded", ObjectID: "inv-1", At: at(3.1)}},
			{MsgID: "m3", Key: k1, Op: "invoice.create", Kind: KindAlt, Fingerprint: "fb", At: at(4), Acked: at(4.01),
				Reply: &Reply{Status: "conflict", At: at(4.1)}},
			{MsgID: "m4", Key: k2, Op: "payment.charge", Kind: KindFresh, Fingerprint: "fc", At: at(5), Acked: at(5.01)},
			{MsgID: "m5", Key: kp, Op: "payment.charge", Kind: KindPoison, At: at(6), Acked: at(6.01)},
		},
		Effects: []Effect{{Target: "onec", Key: k1, ObjectID: "inv-1", At: at(0.5)}},
		Results: []ResultMsg{
			{Key: k1, EventID: "m1", Status: "pending", At: at(2)},
			{Key: k1, EventID: "m1", Status: "succeeded", ObjectID: "inv-1", At: at(3)},
			{Key: k1, EventID: "m3", Status: "conflict", At: at(4.1)},
			{Key: k2, EventID: "m4", Status: "failed_final", At: at(5.5)},
			{Key: kp, EventID: "m5", Status: "rejected", At: at(6.1)},
		},
		Rows: []Row{
			{Key: k1, Status: "succeeded", ObjectID: "inv-1", RequestHash: "fa", Token: 2},
			{Key: k2, Status: "failed_final", RequestHash: "fc", Token: 1},
		},
		Attempts: []Attempt{
			{Key: k1, Attempt: 1, Token: 1, Worker: "r1", Kind: "execute", Started: at(0.1), Finished: at(1), Outcome: "unknown"},
			{Key: k1, Attempt: 1, Token: 2, Worker: "r2", Kind: "reconcile", Started: at(2), Finished: at(2.5), Outcome: "succeeded", Note: "reconciled: found by key"},
			{Key: k2, Attempt: 1, Token: 1, Worker: "r3", Kind: "execute", Started: at(5.1), Finished: at(5.4), Outcome: "failed_final"},
		},
		Texts: []Text{
			{Where: "r1.log", Body: []byte(`{"msg":"command rejected","operation_key":"soak:payment.charge:p3:v1"}`)},
			// Producers publish the free-text canary; a card in free text
			// is published masked.
			{Where: "commands stream", Commands: true, Body: []byte(`{"payload":{"description":"Invoice cnry0123-i1, card 4539 57** **** 1486"}}`)},
			{Where: "journal dump", Body: []byte(`{"kind":"operator","note":"customer read out 4539 57** **** 1486 and [REDACTED]"}`)},
			{Where: "HTTP API error bodies", Body: []byte(`{"status":422,"detail":"payload.order_id: contains a card-like number","instance":"/v1/operations/soak:payment.charge:453957******1486:v1"}`)},
		},
		Canary:         "cnry0123",
		SecretCanaries: []string{"4539578763621486", "4539 5787 6362 1486", "sk_live_cnry4567"},
		Secrets:        []string{"sandbox-1c-password"},
		NativeOnly:     map[string]bool{"onec": true, "yookassa": true},
		Windows:        []Window{{Kind: NemKill, Start: at(0), End: at(2)}},
	}
}

// TestCheckFencingAtWorkIsNoBreach: the journal's closed attempts trail
// (migration 0002) records what fencing did: an attempt whose lease was
// taken over while it was open is closed abandoned, and its worker's late
// completion, refused, turns it fenced. Neither is a stale completion, an
// illegal transition or an open attempt; a lookup follows either. An
// operator may decide a failed_retryable operation.
func TestCheckFencingAtWorkIsNoBreach(t *testing.T) {
	h := healthy()
	// k1: the executor was paused past its lease; the reconciler took over
	// (token 2) and the executor reported at 4 s: refused, fenced.
	h.Attempts[0].Outcome = "fenced"
	h.Attempts[0].Finished = at(4)
	h.Attempts[0].Note = "lease taken over before this outcome was recorded: succeeded (object inv-1)"
	// A reconcile attempt taken over in turn (abandoned, no note), then a
	// lookup that settled it.
	h.Attempts[1].Outcome = "abandoned"
	h.Attempts[1].Note = ""
	h.Attempts[1].Finished = at(2.4)
	h.Attempts = append(h.Attempts, Attempt{Key: h.Sent[0].Key, Attempt: 1, Token: 3, Worker: "r3", Kind: "reconcile",
		Started: at(2.4), Finished: at(2.6), Outcome: "succeeded", Note: "reconciled: found by key"})
	h.Rows[0].Token = 3
	// k2: a retryable failure an operator decided.
	h.Attempts[2].Outcome = "failed_retryable"
	h.Attempts = append(h.Attempts, Attempt{Key: h.Sent[3].Key, Attempt: 1, Token: 2, Worker: "ops", Kind: "operator",
		Started: at(5.45), Finished: at(5.45), Outcome: "failed_final", Note: "checked by hand"})
	h.Rows[1].Token = 2
	rep := Check(h, nil)
	if !rep.Pass {
		t.Fatalf("fencing at work failed the check: %v\n%s", rep.Breached, summary(rep))
	}
	// The same late report accepted (recorded as its outcome) is stale.
	h.Attempts[0].Outcome = "succeeded"
	if rep := Check(h, nil); !slices.Contains(rep.Breached, InvStale) {
		t.Fatalf("an outcome accepted after the take-over passed: %v", rep.Breached)
	}
}

func TestCheckHealthyHistoryPasses(t *testing.T) {
	rep := Check(healthy(), nil)
	if !rep.Pass || len(rep.Breached) > 0 {
		t.Fatalf("a healthy history failed: %v\n%s", rep.Breached, summary(rep))
	}
	if rep.Counts.Commands != 5 || rep.Counts.Intents != 3 || rep.Counts.Effects != 1 {
		t.Errorf("counts = %+v", rep.Counts)
	}
	if len(rep.Invariants) != len(invariantOrder) {
		t.Errorf("%d invariants reported, want %d", len(rep.Invariants), len(invariantOrder))
	}
}

// TestCheckEachInvariantCanFail breaks the healthy history in one way per
// case and expects exactly the named invariant (among possibly others that
// follow from it) to be breached, with the offending key in its examples.
func TestCheckEachInvariantCanFail(t *testing.T) {
	const k1, k2, kp = "soak:invoice.create:i1:v1", "soak:payment.charge:i2:v1", "soak:payment.charge:p3:v1"
	cases := []struct {
		name    string
		inv     string
		key     string
		mutate  func(h *History)
		exactly bool // no other invariant may be breached
	}{
		{"second effect for a keyed intent", InvEffects, k1, func(h *History) {
			h.Effects = append(h.Effects, Effect{Target: "onec", Key: k1, ObjectID: "inv-2", At: at(1)})
		}, true},
		{"succeeded without any effect", InvEffects, k1, func(h *History) {
			h.Effects = nil
		}, false},
		{"command without a final result", InvLost, k2, func(h *History) {
			h.Results = h.Results[:3]
		}, true},
		{"commands left in the consumer", InvLost, "consumer", func(h *History) {
			h.Unacked = 7
		}, true},
		{"a delivery held past its bound", InvHeld, "idemgate-2", func(h *History) {
			h.HeldMax = map[string]float64{"idemgate-1": 12, "idemgate-2": 140}
			h.HeldBound = 46
		}, true},
		{"conflicting copy never answered", InvLost, k1, func(h *History) {
			h.Results = append(h.Results[:2], h.Results[3:]...)
			h.Sent[2].Reply = nil
		}, true},
		{"gated charge executed with no approval recorded", InvUnapproved, k2, func(h *History) {
			gatedCharge(h)
		}, true},
		{"gated charge executed after a denial", InvUnapproved, k2, func(h *History) {
			gatedCharge(h)
			h.Approvals = []ApprovalRec{{Key: k2, State: "denied", RequestHash: "fc"}}
		}, true},
		{"gated charge executed under another fingerprint than approved", InvUnapproved, k2, func(h *History) {
			gatedCharge(h)
			h.Approvals = []ApprovalRec{{Key: k2, State: "approved", RequestHash: "fd", Approved: []string{"fd"}}}
		}, true},
		{"gated charge left waiting after settling", InvUnapproved, k2, func(h *History) {
			h.Sent[3].NeedsApproval = true
			h.Approvals = []ApprovalRec{{Key: k2, State: "pending", RequestHash: "fc"}}
		}, true},
		{"effect nobody asked for", InvPhantom, "soak:invoice.create:ghost:v1", func(h *History) {
			h.Effects = append(h.Effects, Effect{Target: "onec", Key: "soak:invoice.create:ghost:v1", ObjectID: "inv-9", At: at(1)})
		}, true},
		{"row left unknown", InvUnsettled, k2, func(h *History) {
			h.Rows[1].Status = "unknown"
			h.Attempts[2].Outcome = "unknown"
		}, false},
		{"copies disagree on the object", InvContradictions, k1, func(h *History) {
			h.Sent[1].Reply.ObjectID = "inv-7"
		}, false},
		{"copies disagree on the status", InvContradictions, k1, func(h *History) {
			h.Sent[1].Reply = &Reply{Status: "failed_final", At: at(3)}
		}, false},
		{"journal object is not the ledger's", InvMismatch, k1, func(h *History) {
			h.Effects[0].ObjectID = "inv-other"
		}, true},
		{"execute right after unknown", InvBlindRetry, k1, func(h *History) {
			h.Attempts[1].Kind = "execute"
			h.Attempts[1].Attempt = 2
		}, false},
		{"lookup missed an existing object", InvBlindRetry, k1, func(h *History) {
			h.Attempts[1].Outcome = "failed_retryable"
			h.Attempts = append(h.Attempts, Attempt{Key: k1, Attempt: 2, Token: 3, Worker: "r2", Kind: "execute",
				Started: at(2.6), Finished: at(2.8), Outcome: "succeeded"})
			h.Rows[0].Token = 3
		}, true},
		{"attempt after a terminal outcome", InvIllegal, k2, func(h *History) {
			h.Attempts = append(h.Attempts, Attempt{Key: k2, Attempt: 2, Token: 2, Worker: "r1", Kind: "execute",
				Started: at(5.6), Finished: at(5.7), Outcome: "failed_final"})
			h.Rows[1].Token = 2
		}, true},
		{"unknown outcome in the trail", InvIllegal, k2, func(h *History) {
			h.Attempts[2].Outcome = "exploded"
		}, false},
		{"conflicting copy answered succeeded", InvNotExecuted, k1, func(h *History) {
			h.Sent[2].Reply = &Reply{Status: "succeeded", ObjectID: "inv-1", At: at(4.1)}
		}, true},
		{"poison executed", InvNotExecuted, kp, func(h *History) {
			h.Effects = append(h.Effects, Effect{Target: "yookassa", Key: kp, ObjectID: "pay-1", At: at(6.05)})
		}, true},
		{"stale owner's completion recorded after the take-over", InvStale, k1, func(h *History) {
			h.Attempts[0].Finished = at(4) // token 2 was issued at 2
		}, true},
		{"row outcome from another lease", InvStale, k1, func(h *History) {
			h.Attempts[1].Outcome = "unknown"
			h.Attempts[1].Note = ""
		}, false},
		{"lookup attempt closed by an executor's completion", InvStale, k1, func(h *History) {
			h.Attempts[1].Note = ""
		}, true},
		{"failed_final while the object exists", InvFailedFinalObj, k2, func(h *History) {
			h.Effects = append(h.Effects, Effect{Target: "yookassa", Key: k2, ObjectID: "pay-2", At: at(5.2)})
		}, true},
		{"canary in a daemon log", InvCanary, "r1.log", func(h *History) {
			h.Texts = append(h.Texts, Text{Where: "r1.log", Body: []byte(`{"msg":"oops","description":"cnry0123-i1"}`)})
		}, true},
		{"credential in the metrics", InvCanary, "metrics-r2.txt", func(h *History) {
			h.Texts = append(h.Texts, Text{Where: "metrics-r2.txt", Body: []byte(`x{password="sandbox-1c-password"} 1`)})
		}, true},
		{"card number published unmasked", InvCanary, "commands stream", func(h *History) {
			h.Texts[1].Body = []byte(`{"payload":{"description":"Invoice cnry0123-i1, card 4539 5787 6362 1486"}}`)
		}, true},
		{"key in an id published", InvCanary, "commands stream", func(h *History) {
			h.Texts[1].Body = []byte(`{"payload":{"account_id":"sk_live_cnry4567"}}`)
		}, true},
		{"card number in an operator's evidence", InvCanary, "journal dump", func(h *History) {
			h.Texts[2].Body = []byte(`{"kind":"operator","note":"customer read out 4539578763621486"}`)
		}, true},
		{"card number echoed in an error body", InvCanary, "HTTP API error bodies", func(h *History) {
			h.Texts[3].Body = []byte(`{"status":401,"instance":"/v1/operations/soak:payment.charge:4539578763621486:v1"}`)
		}, true},
		{"free-text canary in an error body", InvCanary, "HTTP API error bodies", func(h *History) {
			h.Texts[3].Body = []byte(`{"status":422,"detail":"description cnry0123-i9"}`)
		}, true},
		{"attempt left open", InvOpenAttempts, k2, func(h *History) {
			h.Attempts[2].Finished = time.Time{}
			h.Attempts[2].Outcome = ""
		}, false},
		{"execute right after an abandoned attempt", InvBlindRetry, k1, func(h *History) {
			h.Attempts[0].Outcome = "abandoned"
			h.Attempts[0].Finished = h.Attempts[1].Started
			h.Attempts[1].Kind = "execute"
			h.Attempts[1].Attempt = 2
		}, false},
		{"execute right after a fenced attempt", InvBlindRetry, k1, func(h *History) {
			h.Attempts[0].Outcome = "fenced"
			h.Attempts[0].Finished = at(2.2)
			h.Attempts[1].Kind = "execute"
			h.Attempts[1].Attempt = 2
		}, false},
		{"a token skipped in the trail", InvIllegal, k1, func(h *History) {
			h.Attempts[1].Token = 3
			h.Rows[0].Token = 3
		}, true},
		{"row under a token the trail does not end with", InvIllegal, k2, func(h *History) {
			h.Rows[1].Token = 2
			h.Rows[1].Status = "unknown"
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := healthy()
			tc.mutate(&h)
			rep := Check(h, nil)
			if rep.Pass {
				t.Fatalf("passed; want %s breached", tc.inv)
			}
			var iv *Invariant
			for i := range rep.Invariants {
				if rep.Invariants[i].Name == tc.inv {
					iv = &rep.Invariants[i]
				}
			}
			if iv == nil || !iv.Breached {
				t.Fatalf("%s not breached; breached: %v\n%s", tc.inv, rep.Breached, summary(rep))
			}
			found := false
			for _, e := range iv.Examples {
				if strings.HasPrefix(e, tc.key+":") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s examples %q do not name %s", tc.inv, iv.Examples, tc.key)
			}
			if tc.exactly && len(rep.Breached) != 1 {
				t.Errorf("breached %v, want only %s", rep.Breached, tc.inv)
			}
		})
	}
}

// gatedCharge turns the healthy history's failed charge into one the
// approval policy gates, which then succeeded with one payment.
func gatedCharge(h *History) {
	const k2 = "soak:payment.charge:i2:v1"
	h.Sent[3].NeedsApproval = true
	h.Sent[3].Reply = &Reply{Status: "succeeded", ObjectID: "pay-1", At: at(5.5)}
	h.Effects = append(h.Effects, Effect{Target: "yookassa", Key: k2, ObjectID: "pay-1", At: at(5.2)})
	h.Results[3] = ResultMsg{Key: k2, EventID: "m4", Status: "succeeded", ObjectID: "pay-1", At: at(5.5)}
	h.Rows[1] = Row{Key: k2, Status: "succeeded", ObjectID: "pay-1", RequestHash: "fc", Token: 1}
	h.Attempts[2].Outcome = "succeeded"
}

// TestCheckApprovedGatedChargePasses: a gated charge executed once after an
// approval covering its fingerprint breaches nothing.
func TestCheckApprovedGatedChargePasses(t *testing.T) {
	h := healthy()
	gatedCharge(&h)
	h.Approvals = []ApprovalRec{{Key: "soak:payment.charge:i2:v1", State: "approved", RequestHash: "fc", Approved: []string{"fc"}}}
	if rep := Check(h, nil); !rep.Pass {
		t.Fatalf("an approved gated charge failed the check: %v\n%s", rep.Breached, summary(rep))
	}
}

// TestCheckResidualWindowIsNotABreach: two objects for one key made while a
// connector dropped the key of a native-key-only target are the documented
// residual window: noted, not failed. The same in front of Bitrix24 (which
// looks up before it creates) is a breach.
func TestCheckResidualWindowIsNotABreach(t *testing.T) {
	h := healthy()
	h.Effects = append(h.Effects, Effect{Target: "onec", Key: h.Sent[0].Key, ObjectID: "inv-2", KeyIgnored: true, At: at(1)})
	rep := Check(h, nil)
	if !rep.Pass || rep.Counts.Unprotect != 1 || len(rep.Notes) != 1 {
		t.Fatalf("residual window: pass=%v unprotected=%d notes=%q breached=%v", rep.Pass, rep.Counts.Unprotect, rep.Notes, rep.Breached)
	}
	h.Effects[1].Target = "bitrix24"
	h.Effects[0].Target = "bitrix24"
	if rep := Check(h, nil); rep.Pass {
		t.Fatal("a duplicate behind a key-dropping connector in front of a lookup target passed")
	}
}

// TestCheckKnownDefectReportedNotFailed: an invariant named as known is
// breached in the report but does not fail the run.
func TestCheckKnownDefectReportedNotFailed(t *testing.T) {
	h := healthy()
	h.Attempts[2].Finished = time.Time{}
	rep := Check(h, map[string]bool{InvOpenAttempts: true})
	if !rep.Pass || len(rep.Breached) != 1 || rep.Breached[0] != InvOpenAttempts {
		t.Fatalf("pass=%v breached=%v", rep.Pass, rep.Breached)
	}
	if md := markdown(rep); !strings.Contains(md, "breached (known defect)") {
		t.Errorf("the markdown report does not mark the known defect:\n%s", md)
	}
}

func TestLatencyByWindow(t *testing.T) {
	rep := Check(healthy(), nil)
	got := map[string]LatencyRow{}
	for _, l := range rep.Latency {
		got[l.Window] = l
	}
	// m1 (+0s, reply at 3s) and m2 (+1s, reply at 3.1s) were published in
	// the kill window; m3, m4 (from the stream), m5 in quiet time.
	if k := got[NemKill]; k.N != 2 || k.Max != 3*time.Second || k.P50 != 2100*time.Millisecond {
		t.Errorf("kill window latency = %+v", k)
	}
	if q := got["quiet"]; q.N != 3 {
		t.Errorf("quiet latency = %+v", q)
	}
	if a := got["all"]; a.N != 5 {
		t.Errorf("all latency = %+v", a)
	}
}

// TestReadSandbox: the soak takes URLs and adapter blocks from `idemgate
// sandbox --json`, and its secrets from the credentials typed as secrets,
// whatever their names.
func TestReadSandbox(t *testing.T) {
	listing := `{"emulators":[
{"name":"amocrm","url":"http://127.0.0.1:38733","admin":"http://127.0.0.1:38733/_sandbox",
 "credentials":[{"name":"token","value":"sandbox-amocrm-token","type":"token","secret":true},
  {"name":"key_field_id","value":"1278898021","type":"identifier","secret":false}],
 "adapter":{"base_url":"http://127.0.0.1:38733","key_field_id":1278898021,"token":"sandbox-amocrm-token"}},
{"name":"onec","url":"http://127.0.0.1:37583","admin":"http://127.0.0.1:37583/_sandbox",
 "credentials":[{"name":"user","value":"integration","type":"identifier","secret":false},
  {"name":"password","value":"sandbox-1c-password","type":"password","secret":true}],
 "adapter":{"base_url":"http://127.0.0.1:37583/base","password":"sandbox-1c-password","user":"integration"}},
{"name":"wms","url":"http://127.0.0.1:36967","credentials":[{"name":"token","value":"wms \"quoted\" token","type":"token","secret":true}]}
]}
`
	info, err := readSandbox(strings.NewReader(listing + "more output\n"))
	if err != nil {
		t.Fatal(err)
	}
	if info.urls["onec"] != "http://127.0.0.1:37583" || info.urls["wms"] != "http://127.0.0.1:36967" {
		t.Errorf("urls = %v", info.urls)
	}
	if got := strings.Join(info.secrets, ","); got != `sandbox-amocrm-token,sandbox-1c-password,wms "quoted" token` {
		t.Errorf("secrets = %q", got)
	}
	block, err := info.adapterYAML("onec")
	if err != nil {
		t.Fatal(err)
	}
	if want := "  onec:\n    base_url: \"http://127.0.0.1:37583/base\"\n    password: \"sandbox-1c-password\"\n    user: \"integration\"\n"; block != want {
		t.Errorf("onec block = %q, want %q", block, want)
	}
	if block, _ := info.adapterYAML("amocrm"); !strings.Contains(block, "    key_field_id: 1278898021\n") {
		t.Errorf("amocrm block = %q", block)
	}
	if _, err := info.adapterYAML("wms"); err == nil {
		t.Error("a declared target has no adapter block, yet one was written")
	}
	for _, bad := range []string{"idemgate sandbox: crashed\n", `{"emulators":[]}`} {
		if _, err := readSandbox(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
