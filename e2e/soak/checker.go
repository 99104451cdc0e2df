package main

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Invariant names, stable: CI and docs/soak.md refer to them.
const (
	InvEffects        = "effects_per_intent"
	InvLost           = "lost"
	InvPhantom        = "phantom_effects"
	InvUnsettled      = "unsettled_rows"
	InvContradictions = "contradictions"
	InvMismatch       = "object_mismatches"
	InvBlindRetry     = "blind_retries"
	InvIllegal        = "illegal_transitions"
	InvNotExecuted    = "conflict_or_poison_executed"
	InvStale          = "stale_completions"
	InvFailedFinalObj = "failed_final_with_object"
	InvCanary         = "canary_leaks"
	InvOpenAttempts   = "open_attempts"
)

// invariantOrder is the report's order, with what each checks.
var invariantOrder = []struct{ name, says string }{
	{InvEffects, "effects per intent (ledger): ≤ 1 wherever a key or a lookup protects it; exactly 1 for every succeeded"},
	{InvLost, "every command sent has a final result (results stream or reply); nothing left in the consumer"},
	{InvPhantom, "no effect in a target without a command that asked for it"},
	{InvUnsettled, "no journal row started, unknown or failed_retryable after settling"},
	{InvContradictions, "copies of one intent report one final status and one object id"},
	{InvMismatch, "a succeeded operation's object id is the ledger's object for its key (journal, results, replies)"},
	{InvBlindRetry, "no execute after an unknown (or abandoned) attempt without a lookup in between; no lookup reporting 'not found' for an object that existed"},
	{InvIllegal, "only the journal's legal transitions in the attempts trail"},
	{InvNotExecuted, "a conflicting copy or a poison command is never executed, never answered as succeeded"},
	{InvStale, "no completion accepted under a stale fencing token (the row's outcome is its current lease's; a lookup's attempt is closed by a lookup)"},
	{InvFailedFinalObj, "no failed_final for a key whose object exists in the target"},
	{InvCanary, "no canary secret in daemon logs, the journal, results or metrics"},
	{InvOpenAttempts, "no attempt left open (no outcome) after settling"},
}

// Invariant is one checked guarantee and what breached it.
type Invariant struct {
	Name     string `json:"name"`
	Says     string `json:"says"`
	Count    int    `json:"count"`
	Breached bool   `json:"breached"`
	// Known: breaches of this invariant come from a defect being fixed
	// elsewhere; reported, not failing the run (--known).
	Known bool `json:"known,omitempty"`
	// Examples are the first offending keys, each with what was seen.
	Examples []string `json:"examples,omitempty"`
}

// Report is the checker's verdict.
type Report struct {
	Pass       bool         `json:"pass"`
	Breached   []string     `json:"breached"`
	Counts     Counts       `json:"counts"`
	Invariants []Invariant  `json:"invariants"`
	Latency    []LatencyRow `json:"latency"`
	Windows    []Window     `json:"windows"`
	Notes      []string     `json:"notes,omitempty"`
	Run        *RunInfo     `json:"run,omitempty"`
}

// Counts summarises the history.
type Counts struct {
	Commands  int            `json:"commands"`
	Intents   int            `json:"intents"`
	ByKind    map[string]int `json:"by_kind"`
	ByOp      map[string]int `json:"by_operation"`
	Effects   int            `json:"effects"`
	Results   int            `json:"results"`
	Final     map[string]int `json:"final_status_by_key"`
	Replies   int            `json:"replies"`
	Attempts  int            `json:"attempts"`
	Unprotect int            `json:"unprotected_duplicates"`
}

// LatencyRow is the time from publish to final result in one kind of fault
// window.
type LatencyRow struct {
	Window string        `json:"window"`
	N      int           `json:"n"`
	P50    time.Duration `json:"p50_ns"`
	P99    time.Duration `json:"p99_ns"`
	Max    time.Duration `json:"max_ns"`
}

const maxExamples = 10

// staleSlack absorbs the database clock's granularity between two
// statements racing for one row.
const staleSlack = time.Second

type checker struct {
	h   History
	inv map[string]*Invariant
}

func (c *checker) breach(name, key, format string, args ...any) {
	iv := c.inv[name]
	iv.Count++
	if len(iv.Examples) < maxExamples {
		iv.Examples = append(iv.Examples, key+": "+fmt.Sprintf(format, args...))
	}
}

// intent is what the checker knows of one operation key.
type intent struct {
	key     string
	op      string
	msgs    []Sent
	poison  bool
	effects []Effect
	results []ResultMsg
	row     *Row
	trail   []Attempt
}

func (in *intent) finalResults() []ResultMsg {
	var out []ResultMsg
	for _, r := range in.results {
		if r.Status != "pending" {
			out = append(out, r)
		}
	}
	return out
}

// Check runs every invariant over h. Invariants named in known are reported
// but do not fail the run.
func Check(h History, known map[string]bool) Report {
	c := &checker{h: h, inv: map[string]*Invariant{}}
	for _, o := range invariantOrder {
		c.inv[o.name] = &Invariant{Name: o.name, Says: o.says}
	}
	rep := Report{Windows: h.Windows, Counts: Counts{ByKind: map[string]int{}, ByOp: map[string]int{}, Final: map[string]int{}}}

	byKey := map[string]*intent{}
	get := func(k string) *intent {
		in := byKey[k]
		if in == nil {
			in = &intent{key: k}
			byKey[k] = in
		}
		return in
	}
	var keyless []Sent
	for _, s := range h.Sent {
		rep.Counts.Commands++
		rep.Counts.ByKind[s.Kind]++
		rep.Counts.ByOp[s.Op]++
		if s.Reply != nil {
			rep.Counts.Replies++
		}
		if s.Key == "" {
			keyless = append(keyless, s)
			continue
		}
		in := get(s.Key)
		in.op = s.Op
		in.msgs = append(in.msgs, s)
		if s.Kind == KindPoison {
			in.poison = true
		}
	}
	sentKeys := len(byKey)
	rep.Counts.Intents = sentKeys
	rep.Counts.Effects = len(h.Effects)
	rep.Counts.Results = len(h.Results)
	rep.Counts.Attempts = len(h.Attempts)
	for _, e := range h.Effects {
		if e.Key == "" || byKey[e.Key] == nil {
			c.breach(InvPhantom, e.Key, "effect %s in %s without a command", e.ObjectID, e.Target)
			continue
		}
		byKey[e.Key].effects = append(byKey[e.Key].effects, e)
	}
	for _, r := range h.Results {
		if in := byKey[r.Key]; in != nil {
			in.results = append(in.results, r)
		}
	}
	for i := range h.Rows {
		r := &h.Rows[i]
		if in := byKey[r.Key]; in != nil {
			in.row = r
		} else {
			c.breach(InvPhantom, r.Key, "journal row (%s) without a command", r.Status)
		}
	}
	for _, a := range h.Attempts {
		if in := byKey[a.Key]; in != nil {
			in.trail = append(in.trail, a)
		}
	}

	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		in := byKey[k]
		sort.Slice(in.trail, func(i, j int) bool { return in.trail[i].Token < in.trail[j].Token })
		if in.row != nil {
			rep.Counts.Final[in.row.Status]++
		} else if in.poison {
			rep.Counts.Final["rejected"]++
		}
		c.checkEffects(in, &rep)
		c.checkLost(in)
		c.checkRow(in)
		c.checkContradictions(in)
		c.checkMismatch(in)
		c.checkTrail(in)
		c.checkNotExecuted(in)
		c.checkFailedFinal(in)
	}
	for _, s := range keyless {
		if s.Reply == nil || s.Reply.Status != "rejected" {
			c.breach(InvLost, s.MsgID, "keyless poison got no rejected reply")
		}
	}
	if h.Unacked > 0 {
		c.breach(InvLost, "consumer", "%d commands still pending or unacknowledged after settling", h.Unacked)
	}
	c.checkCanaries()
	rep.Latency = latency(h)

	rep.Pass = true
	for _, o := range invariantOrder {
		iv := c.inv[o.name]
		iv.Breached = iv.Count > 0
		iv.Known = known[o.name]
		if iv.Breached {
			rep.Breached = append(rep.Breached, iv.Name)
			if !iv.Known {
				rep.Pass = false
			}
		}
		rep.Invariants = append(rep.Invariants, *iv)
	}
	return rep
}

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
	if in.row != nil && len(t) == 0 {
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
		if !e.KeyIgnored {
			c.breach(InvFailedFinalObj, in.key, "failed_final, but the target holds %s", e.ObjectID)
			return
		}
	}
}

func (c *checker) checkCanaries() {
	needles := append([]string{}, c.h.Secrets...)
	if c.h.Canary != "" {
		needles = append(needles, c.h.Canary)
	}
	for _, t := range c.h.Texts {
		for j, s := range needles {
			needle := []byte(s)
			if i := bytes.Index(t.Body, needle); i >= 0 {
				n := bytes.Count(t.Body, needle)
				what := "payload canary"
				if j < len(c.h.Secrets) {
					what = "target credential"
				}
				c.inv[InvCanary].Count += n - 1
				c.breach(InvCanary, t.Where, "%s: %d occurrence(s), first at byte %d", what, n, i)
			}
		}
	}
}

// latency measures, per message with a known final answer, the time from its
// first publish to the first final result for its key at or after it (the
// reply when one came, else the results stream), grouped by the nemesis
// window active at publish time.
func latency(h History) []LatencyRow {
	first := map[string][]time.Time{}
	for _, r := range h.Results {
		if r.Status != "pending" {
			first[r.Key] = append(first[r.Key], r.At)
		}
	}
	for k := range first {
		sort.Slice(first[k], func(i, j int) bool { return first[k][i].Before(first[k][j]) })
	}
	groups := map[string][]time.Duration{}
	for _, s := range h.Sent {
		var at time.Time
		if s.Reply != nil {
			at = s.Reply.At
		} else {
			for _, t := range first[s.Key] {
				if !t.Before(s.At) {
					at = t
					break
				}
			}
		}
		if at.IsZero() {
			continue
		}
		d := at.Sub(s.At)
		groups["all"] = append(groups["all"], d)
		active := false
		for _, w := range h.Windows {
			if !s.At.Before(w.Start) && !s.At.After(w.End) {
				groups[w.Kind] = append(groups[w.Kind], d)
				active = true
			}
		}
		if !active {
			groups["quiet"] = append(groups["quiet"], d)
		}
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "all") != (names[j] == "all") {
			return names[i] == "all"
		}
		return names[i] < names[j]
	})
	out := make([]LatencyRow, 0, len(names))
	for _, n := range names {
		ds := groups[n]
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		out = append(out, LatencyRow{Window: n, N: len(ds), P50: pct(ds, 0.50), P99: pct(ds, 0.99), Max: ds[len(ds)-1]})
	}
	return out
}

func pct(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds)-1) * p)
	return ds[i]
}
