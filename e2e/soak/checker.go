package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/idemgate/idemgate/operation"
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
	InvHeld           = "held_too_long"
	InvUnapproved     = "effects_without_approval"
	InvProcessEffects = "process_effects"
	InvProcessSettled = "process_settled"
)

// invariantDoc names an invariant and says what it checks.
type invariantDoc struct{ name, says string }

// invariantOrder is the report's order, with what each checks.
var invariantOrder = []invariantDoc{
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
	{InvCanary, "no canary secret in daemon logs, the journal (its notes too), results, metrics, the commands stream or the HTTP API's error bodies"},
	{InvOpenAttempts, "no attempt left open (no outcome) after settling"},
	{InvUnapproved, "no effect for an intent the approval policy gates without a recorded approval covering its fingerprint; every gated intent decided or expired, none left waiting"},
	{InvProcessEffects, "per process: each step and each compensation made at most one effect, a compensation only for a step that made its effect; a succeeded process has each step's effect once and no compensation; a compensated one nothing of the failed step or after it, and every step before it with a compensation undone (each charge refunded, each invoice cancelled)"},
	{InvProcessSettled, "every process sent came to rest (succeeded, compensated or left for review; none running or compensating) and had a final answer published"},
	{InvHeld, "no command delivery held in progress longer than a call run, its lookup and a bounded wait for another (retry.in_lease + 3 × call_timeout), plus the nemesis's longest outage"},
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
	// Processes counts the processes sent, ProcessFinal their states.
	Processes    int            `json:"processes"`
	ProcessFinal map[string]int `json:"process_status,omitempty"`
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
	key      string
	op       string
	msgs     []Sent
	poison   bool
	effects  []Effect
	results  []ResultMsg
	row      *Row
	trail    []Attempt
	approval *ApprovalRec
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
	rep := Report{Windows: h.Windows, Counts: Counts{ByKind: map[string]int{}, ByOp: map[string]int{}, Final: map[string]int{}, ProcessFinal: map[string]int{}}}
	ix, opSent := indexProcesses(h)

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
		if s.Op == processOp {
			rep.Counts.Commands++
			rep.Counts.ByKind[s.Kind]++
			rep.Counts.ByOp[s.Op]++
		}
	}
	for _, s := range opSent {
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
	// The steps and compensations of the processes sent are operations the
	// daemons sent themselves: each is an intent of its own.
	for k := range ix.stepOf {
		if kk, err := operation.ParseKey(k); err == nil {
			get(k).op = kk.Operation
		}
	}
	rep.Counts.Effects = len(h.Effects)
	rep.Counts.Results = len(h.Results)
	rep.Counts.Attempts = len(h.Attempts)
	for _, e := range h.Effects {
		k := ix.journalKey(e.Key)
		if e.Key == "" || byKey[k] == nil {
			c.breach(InvPhantom, e.Key, "effect %s in %s without a command", e.ObjectID, e.Target)
			continue
		}
		byKey[k].effects = append(byKey[k].effects, e)
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
	for i := range h.Approvals {
		if in := byKey[h.Approvals[i].Key]; in != nil {
			in.approval = &h.Approvals[i]
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
		c.checkApproval(in)
	}
	for _, s := range keyless {
		if s.Reply == nil || s.Reply.Status != "rejected" {
			c.breach(InvLost, s.MsgID, "keyless poison got no rejected reply")
		}
	}
	if h.Unacked > 0 {
		c.breach(InvLost, "consumer", "%d commands still pending or unacknowledged after settling", h.Unacked)
	}
	if h.HeldBound > 0 {
		for _, name := range slices.Sorted(maps.Keys(h.HeldMax)) {
			if held := h.HeldMax[name]; held > h.HeldBound {
				c.breach(InvHeld, name, "held a delivery %.0f s (bound %.0f s)", held, h.HeldBound)
			}
		}
	}
	c.checkProcesses(ix, byKey, &rep)
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
