// The attempts trail read against the journal's state machine: legal
// transitions, blind retries, stale completions and attempts left open.

package main

import (
	"time"
)

// Attempt outcomes of the journal's trail (journal.AttemptOutcome). The
// first four are statuses a completion recorded (accepted under the
// attempt's own token); fenced and abandoned are the fencing token at work:
// the attempt's lease was taken over (abandoned: while it was open; fenced:
// its worker then reported, and its completion was refused).
const (
	outSucceeded = "succeeded"
	outFailedFin = "failed_final"
	outRetryable = "failed_retryable"
	outUnknown   = "unknown"
	outFenced    = "fenced"
	outAbandoned = "abandoned"
)

// accepted reports whether an outcome was recorded by an accepted
// completion (one that changed the row).
func accepted(outcome string) bool {
	switch outcome {
	case outSucceeded, outFailedFin, outRetryable, outUnknown:
		return true
	}
	return false
}

// checkTrail reads the attempts trail (ordered by fencing token) against the
// journal's state machine (journal/postgres: claim, take-over, complete,
// resolve). Each attempt holds one lease; the next token is issued by:
//
//	a claim of a new key                        ─► execute 1
//	a failed_retryable row whose hold passed    ─► execute n+1
//	an unknown row, or a started row whose
//	  lease expired (its attempt open, or closed
//	  abandoned/fenced by the take-over)        ─► reconcile n (lookup first)
//	an operator's decision on a row not final   ─► operator (succeeded/failed_final)
//	succeeded / failed_final end the trail.
//
// An execute after an unknown, abandoned or fenced attempt is a blind retry.
// A fenced attempt (a completion refused for a stale token) is fencing
// working; a completion ACCEPTED after the next token was issued, or an
// outcome recorded under a token whose attempt says otherwise, is a stale
// completion.
func (c *checker) checkTrail(in *intent) {
	t := in.trail
	for i, a := range t {
		switch a.Outcome {
		case "", outSucceeded, outFailedFin, outRetryable, outUnknown, outFenced, outAbandoned:
		default:
			c.breach(InvIllegal, in.key, "attempt %d (token %d) outcome %q", a.Attempt, a.Token, a.Outcome)
		}
		if a.Kind == "operator" && a.Outcome != outSucceeded && a.Outcome != outFailedFin {
			c.breach(InvIllegal, in.key, "operator attempt (token %d) outcome %q", a.Token, a.Outcome)
		}
		if i == 0 {
			if a.Kind != "execute" || a.Attempt != 1 || a.Token != 1 {
				c.breach(InvIllegal, in.key, "the trail starts with %s attempt %d (token %d)", a.Kind, a.Attempt, a.Token)
			}
			continue
		}
		p := t[i-1]
		if a.Token != p.Token+1 {
			c.breach(InvIllegal, in.key, "token %d follows token %d: every take-over issues the next token", a.Token, p.Token)
		}
		switch p.Outcome {
		case outSucceeded, outFailedFin:
			c.breach(InvIllegal, in.key, "%s (token %d) after %s (token %d)", a.Kind, a.Token, p.Outcome, p.Token)
		case outRetryable:
			switch {
			case a.Kind == "operator":
			case a.Kind != "execute" || a.Attempt != p.Attempt+1:
				c.breach(InvIllegal, in.key, "%s attempt %d after failed_retryable attempt %d", a.Kind, a.Attempt, p.Attempt)
			}
		case outUnknown, outFenced, outAbandoned, "":
			what := p.Outcome
			if what == "" {
				what = "open"
			}
			switch a.Kind {
			case "execute":
				c.breach(InvBlindRetry, in.key, "execute (token %d) right after an %s attempt (token %d), no lookup", a.Token, what, p.Token)
			case "reconcile":
				if a.Attempt != p.Attempt {
					c.breach(InvIllegal, in.key, "reconcile attempt %d after attempt %d", a.Attempt, p.Attempt)
				}
			}
		}
		if p.Outcome == "" {
			// Every take-over closes the attempts it supersedes.
			c.breach(InvIllegal, in.key, "%s attempt (token %d) still open after token %d was issued", p.Kind, p.Token, a.Token)
		}
		// A lookup that answered "not found" while the target held an
		// object with this key (made before the lookup began, key kept) sent
		// the next execute in blind.
		if p.Kind == "reconcile" && p.Outcome == outRetryable && a.Kind == "execute" {
			for _, e := range in.effects {
				if !e.KeyIgnored && e.At.Before(p.Started) {
					c.breach(InvBlindRetry, in.key, "lookup (token %d) found nothing, but object %s existed since %s; execute (token %d) followed",
						p.Token, e.ObjectID, e.At.Format(time.RFC3339Nano), a.Token)
					break
				}
			}
		}
		// Fencing: an outcome is accepted only while its lease is current,
		// i.e. before the next token was issued. A refused one (fenced) or
		// one the take-over closed (abandoned) is fencing at work.
		if accepted(p.Outcome) && !p.Finished.IsZero() && p.Finished.After(a.Started.Add(staleSlack)) {
			c.breach(InvStale, in.key, "attempt with token %d recorded %s at %s, after token %d was issued at %s",
				p.Token, p.Outcome, p.Finished.Format(time.RFC3339Nano), a.Token, a.Started.Format(time.RFC3339Nano))
		}
	}
	if in.row != nil && len(t) > 0 {
		last := t[len(t)-1]
		if last.Token != in.row.Token {
			c.breach(InvIllegal, in.key, "row %s under token %d, the trail's last attempt holds token %d", in.row.Status, in.row.Token, last.Token)
		}
	}
	if in.row != nil && len(t) > 0 && (in.row.Status == outSucceeded || in.row.Status == outFailedFin) {
		var cur *Attempt
		for i := range t {
			if t[i].Token == in.row.Token {
				cur = &t[i]
			}
		}
		switch {
		case cur == nil:
			c.breach(InvStale, in.key, "row %s under token %d, which no attempt holds", in.row.Status, in.row.Token)
		case cur.Outcome != in.row.Status:
			c.breach(InvStale, in.key, "row %s under token %d, whose attempt (%s by %s) recorded %q: the outcome came from another lease",
				in.row.Status, in.row.Token, cur.Kind, cur.Worker, cur.Outcome)
		}
	}
	if in.row != nil && len(t) == 0 && !endedByPerson(in) {
		c.breach(InvIllegal, in.key, "row %s without any attempt", in.row.Status)
	}
	for _, a := range t {
		// Every lookup's completion says what the lookup found (the note):
		// a reconcile attempt whose accepted outcome has none was closed by
		// an executor's completion, i.e. under another lease's token.
		if a.Kind == "reconcile" && accepted(a.Outcome) && a.Note == "" {
			c.breach(InvStale, in.key, "reconcile attempt (token %d, %s) closed as %q by a completion that did no lookup", a.Token, a.Worker, a.Outcome)
		}
		if a.Finished.IsZero() || a.Outcome == "" {
			c.breach(InvOpenAttempts, in.key, "%s attempt %d (token %d, %s) never closed", a.Kind, a.Attempt, a.Token, a.Worker)
		}
	}
}

// endedByPerson reports whether in's row is the failed_final a denial or an
// expired wait writes: no attempt was ever made, which is the point.
func endedByPerson(in *intent) bool {
	return in.row.Status == outFailedFin && in.approval != nil &&
		(in.approval.State == "denied" || in.approval.State == "expired") && in.approval.RequestHash == in.row.RequestHash
}
