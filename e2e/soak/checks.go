// The per-intent invariants (effects, lost, unsettled, contradictions,
// mismatches, conflicts and poison, failed_final with an object) and the
// canary search; the trail's are in trail.go.

package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// protected reports whether an effect's key was protected: a connector that
// dropped the key in front of a target with no lookup before create leaves
// the documented residual window.
func (c *checker) protected(e Effect) bool {
	return !(e.KeyIgnored && c.h.NativeOnly[e.Target])
}

func (c *checker) checkEffects(in *intent, rep *Report) {
	n := len(in.effects)
	if n > 1 {
		unprotected := false
		for _, e := range in.effects {
			if !c.protected(e) {
				unprotected = true
			}
		}
		if unprotected {
			rep.Counts.Unprotect++
			if rep.Counts.Unprotect <= maxExamples {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d effects while a connector dropped the key of a target without lookup-before-create (residual window, not a breach)", in.key, n))
			}
		} else {
			c.breach(InvEffects, in.key, "%d effects: %s", n, objects(in.effects))
		}
	}
	if in.row != nil && in.row.Status == "succeeded" && n == 0 {
		c.breach(InvEffects, in.key, "succeeded (object %q) with no effect in the target", in.row.ObjectID)
	}
}

func objects(es []Effect) string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ObjectID
		if e.KeyIgnored {
			ids[i] += "(key dropped)"
		}
	}
	return strings.Join(ids, ",")
}

// winner is the fingerprint that owns the key (the journal's request hash).
func (in *intent) winner() string {
	if in.row != nil {
		return in.row.RequestHash
	}
	return ""
}

func (c *checker) checkLost(in *intent) {
	final := in.finalResults()
	has := func(statuses ...string) bool {
		for _, r := range final {
			for _, s := range statuses {
				if r.Status == s {
					return true
				}
			}
		}
		return false
	}
	for _, m := range in.msgs {
		replied := func(statuses ...string) bool {
			if m.Reply == nil {
				return false
			}
			for _, s := range statuses {
				if m.Reply.Status == s {
					return true
				}
			}
			return false
		}
		var ok bool
		switch {
		case m.Kind == KindPoison:
			ok = has("rejected") || replied("rejected")
		case in.winner() != "" && m.Fingerprint != in.winner():
			// A wrong answer is conflict_or_poison_executed's to report;
			// lost is no answer at all.
			ok = has("conflict") || replied("conflict", "succeeded", "failed_final", "rejected")
		default:
			ok = has("succeeded", "failed_final") || replied("succeeded", "failed_final")
		}
		if !ok {
			c.breach(InvLost, in.key, "message %s (%s) has no final result (results seen: %s)", m.MsgID, m.Kind, statuses(final))
			return // one example per key
		}
	}
}

func statuses(rs []ResultMsg) string {
	if len(rs) == 0 {
		return "none"
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Status
	}
	return strings.Join(s, ",")
}

func (c *checker) checkRow(in *intent) {
	if in.row == nil {
		return
	}
	switch in.row.Status {
	case "started", "unknown", "failed_retryable":
		c.breach(InvUnsettled, in.key, "row %s after settling", in.row.Status)
	}
}

func (c *checker) checkContradictions(in *intent) {
	type answer struct{ status, object string }
	var first *answer
	var firstFrom string
	see := func(a answer, from string) {
		if a.status != "succeeded" && a.status != "failed_final" {
			return
		}
		if first == nil {
			first, firstFrom = &a, from
			return
		}
		if a != *first {
			c.breach(InvContradictions, in.key, "%s says %s %q, %s says %s %q", firstFrom, first.status, first.object, from, a.status, a.object)
		}
	}
	for _, r := range in.finalResults() {
		see(answer{r.Status, r.ObjectID}, "result of "+r.EventID)
	}
	for _, m := range in.msgs {
		if m.Reply != nil {
			see(answer{m.Reply.Status, m.Reply.ObjectID}, "reply to "+m.MsgID)
		}
	}
}

func (c *checker) checkMismatch(in *intent) {
	if in.row == nil || in.row.Status != "succeeded" {
		return
	}
	obj := in.row.ObjectID
	if len(in.effects) > 0 {
		found := false
		for _, e := range in.effects {
			if e.ObjectID == obj {
				found = true
			}
		}
		if !found {
			c.breach(InvMismatch, in.key, "journal says %q, the target's ledger has %s", obj, objects(in.effects))
			return
		}
	}
	for _, r := range in.finalResults() {
		if r.Status == "succeeded" && r.ObjectID != obj {
			c.breach(InvMismatch, in.key, "journal says %q, result of %s says %q", obj, r.EventID, r.ObjectID)
			return
		}
	}
	for _, m := range in.msgs {
		if m.Reply != nil && m.Reply.Status == "succeeded" && m.Reply.ObjectID != obj {
			c.breach(InvMismatch, in.key, "journal says %q, reply to %s says %q", obj, m.MsgID, m.Reply.ObjectID)
			return
		}
	}
}

func (c *checker) checkNotExecuted(in *intent) {
	if in.poison {
		for _, m := range in.msgs {
			if m.Kind != KindPoison {
				return // a valid message shares the key: not a poison key
			}
		}
		if len(in.effects) > 0 {
			c.breach(InvNotExecuted, in.key, "poison executed: %s", objects(in.effects))
		}
		if in.row != nil {
			c.breach(InvNotExecuted, in.key, "poison claimed in the journal (%s)", in.row.Status)
		}
		for _, r := range in.finalResults() {
			if r.Status != "rejected" {
				c.breach(InvNotExecuted, in.key, "poison answered %s", r.Status)
				break
			}
		}
		return
	}
	w := in.winner()
	if w == "" {
		return
	}
	fp := map[string]string{}
	for _, m := range in.msgs {
		fp[m.MsgID] = m.Fingerprint
	}
	for _, r := range in.finalResults() {
		if f, ok := fp[r.EventID]; ok && f != w && (r.Status == "succeeded" || r.Status == "failed_final") {
			c.breach(InvNotExecuted, in.key, "conflicting copy %s answered %s", r.EventID, r.Status)
		}
	}
	for _, m := range in.msgs {
		if m.Fingerprint != w && m.Reply != nil && (m.Reply.Status == "succeeded" || m.Reply.Status == "failed_final") {
			c.breach(InvNotExecuted, in.key, "conflicting copy %s answered %s", m.MsgID, m.Reply.Status)
		}
	}
}

func (c *checker) checkFailedFinal(in *intent) {
	failed := in.row != nil && in.row.Status == "failed_final"
	for _, r := range in.finalResults() {
		if r.Status == "failed_final" {
			failed = true
		}
	}
	if !failed {
		return
	}
	for _, e := range in.effects {
		if !e.KeyIgnored && !e.Refusal() {
			c.breach(InvFailedFinalObj, in.key, "failed_final, but the target holds %s", e.ObjectID)
			return
		}
	}
}

// checkCanaries looks for every canary in every text: the credentials and
// the secret canaries everywhere, the workload's free-text canary
// everywhere but the commands stream.
func (c *checker) checkCanaries() {
	type needle struct{ what, s string }
	var needles []needle
	for _, s := range c.h.Secrets {
		needles = append(needles, needle{"credential", s})
	}
	for _, s := range c.h.SecretCanaries {
		needles = append(needles, needle{"secret canary (a card number or key only screening or masking keeps out)", s})
	}
	if c.h.Canary != "" {
		needles = append(needles, needle{"payload canary", c.h.Canary})
	}
	for _, t := range c.h.Texts {
		for _, nd := range needles {
			if t.Commands && nd.s == c.h.Canary {
				continue
			}
			needle := []byte(nd.s)
			if i := bytes.Index(t.Body, needle); i >= 0 {
				n := bytes.Count(t.Body, needle)
				c.inv[InvCanary].Count += n - 1
				c.breach(InvCanary, t.Where, "%s: %d occurrence(s), first at byte %d", nd.what, n, i)
			}
		}
	}
}

// checkApproval: an intent the policy gates has effects only with a
// recorded approval whose approve votes cover the fingerprint that
// executed (the journal row's request hash), and ends decided or expired.
func (c *checker) checkApproval(in *intent) {
	if !in.gated() || in.poison {
		return
	}
	a := in.approval
	if len(in.effects) > 0 || (in.row != nil && in.row.Status == "succeeded") {
		switch {
		case a == nil:
			c.breach(InvUnapproved, in.key, "%d effect(s) and no approval request was ever recorded", len(in.effects))
		case a.State != "approved":
			c.breach(InvUnapproved, in.key, "%d effect(s) while the approval is %s", len(in.effects), a.State)
		case in.row != nil && !slices.Contains(a.Approved, in.row.RequestHash):
			c.breach(InvUnapproved, in.key, "executed fingerprint %s, approved %v", in.row.RequestHash, a.Approved)
		}
	}
	if a != nil && a.State == "pending" {
		c.breach(InvUnapproved, in.key, "still waiting for a person after settling (past its approval_ttl)")
	}
}

// gated reports whether the approval policy gates the request that owns
// in's key: the journal row's fingerprint, else (no row) the first
// request's. A conflicting request's amount does not gate the intent.
func (in *intent) gated() bool {
	for _, m := range in.msgs {
		if w := in.winner(); (w != "" && m.Fingerprint == w) || (w == "" && m.Kind == KindFresh) {
			return m.NeedsApproval
		}
	}
	return false
}
