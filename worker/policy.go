package worker

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// RetryPolicy is idemgate's one retry
// schedule. NextRetry gives the delay after a failed attempt (River's
// ClientRetryPolicy shape); everything that waits uses it: the in-lease loop
// (as a backoff.BackOff), the journal's hold on a retryable failure (the next
// attempt's "not before" on the database clock, which copies and
// redeliveries of the command wait out instead of taking an attempt), the
// return of deliveries that found their operation held, lookup rounds, and
// the start-up horizon checks (which sum its upper bounds, Bounds).
//
// The retry budget belongs to the intent, not to a delivery: MaxAttempts
// counts calls to the target across every copy, delivery and replica (the
// journal's attempt count), and MaxElapsed is measured from the intent's
// first attempt on the database clock. It comes from configuration.
type RetryPolicy struct {
	// MaxAttempts bounds the calls to the target for one intent (the journal's
	// attempt count; copies and redeliveries that arrive during a backoff take
	// none). Default 4.
	MaxAttempts int `mapstructure:"max_attempts"`
	// MaxElapsed bounds an intent's retries in time: no attempt starts later
	// than this after the intent's first attempt began (database clock).
	// Default 1m.
	MaxElapsed time.Duration `mapstructure:"max_elapsed"`
	// InitialDelay is the delay after the first attempt. Default 500ms.
	InitialDelay time.Duration `mapstructure:"initial_delay"`
	// Multiplier grows the delay per attempt. Default 2.
	Multiplier float64 `mapstructure:"multiplier"`
	// MaxDelay caps one delay before jitter. Default 5s.
	MaxDelay time.Duration `mapstructure:"max_delay"`
	// Jitter spreads delays randomly by ±50 %. Default true.
	Jitter *bool `mapstructure:"jitter"`
	// InLease bounds the retries one worker runs while it holds the command
	// (sleeping between attempts with the command's AckWait kept alive); a
	// longer wait releases the command to JetStream (NakWithDelay) and the
	// journal's hold keeps every copy away until it ends. Default 10s.
	InLease time.Duration `mapstructure:"in_lease"`
}

// jitterFactor is the spread of a jittered delay around its base.
const jitterFactor = 0.5

// WithDefaults fills zero fields.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, 4)
	p.MaxElapsed = cmp.Or(p.MaxElapsed, time.Minute)
	p.InitialDelay = cmp.Or(p.InitialDelay, 500*time.Millisecond)
	p.Multiplier = cmp.Or(p.Multiplier, 2)
	p.MaxDelay = cmp.Or(p.MaxDelay, 5*time.Second)
	if p.Jitter == nil {
		t := true
		p.Jitter = &t
	}
	p.InLease = cmp.Or(p.InLease, 10*time.Second)
	return p
}

// Validate checks the policy.
func (p RetryPolicy) Validate() error {
	var errs []error
	if p.MaxAttempts < 1 || p.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("retry.max_attempts %d: between 1 and 100", p.MaxAttempts))
	}
	if p.MaxElapsed <= 0 {
		errs = append(errs, fmt.Errorf("retry.max_elapsed %v: must be positive", p.MaxElapsed))
	}
	if p.InitialDelay <= 0 {
		errs = append(errs, fmt.Errorf("retry.initial_delay %v: must be positive", p.InitialDelay))
	}
	if p.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("retry.multiplier %v: at least 1", p.Multiplier))
	}
	if p.MaxDelay < p.InitialDelay {
		errs = append(errs, fmt.Errorf("retry.max_delay %v: at least initial_delay %v", p.MaxDelay, p.InitialDelay))
	}
	if p.InLease <= 0 {
		errs = append(errs, fmt.Errorf("retry.in_lease %v: must be positive", p.InLease))
	}
	return errors.Join(errs...)
}

// base is the delay after attempt n (n ≥ 1) before jitter: InitialDelay
// grown by Multiplier per attempt, capped at MaxDelay.
func (p RetryPolicy) base(n int) time.Duration {
	d := float64(p.InitialDelay)
	for i := 1; i < n && d < float64(p.MaxDelay); i++ {
		d *= p.Multiplier
	}
	return min(time.Duration(d), p.MaxDelay)
}

func (p RetryPolicy) jitter() bool { return p.Jitter == nil || *p.Jitter }

// Bounds are the shortest and longest delay NextRetry(n) can give.
func (p RetryPolicy) Bounds(n int) (lo, hi time.Duration) {
	b := p.base(max(n, 1))
	if !p.jitter() {
		return b, b
	}
	return time.Duration(float64(b) * (1 - jitterFactor)), time.Duration(float64(b) * (1 + jitterFactor))
}

// NextRetry is the delay after attempt n (n ≥ 1; lower n count as 1) before
// the next one: the schedule's base delay, jittered within Bounds(n).
func (p RetryPolicy) NextRetry(n int) time.Duration {
	lo, hi := p.Bounds(n)
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}

// exhausted reports whether the intent's budget is spent: attempts calls
// were made, or the next attempt would start more than MaxElapsed after the
// first one began (next: its start, measured from the first attempt's).
func (p RetryPolicy) exhausted(attempts int, next time.Duration) bool {
	return attempts >= p.MaxAttempts || next > p.MaxElapsed
}

// Horizon is the longest a command may keep being redelivered for retries:
// every delay of the schedule at its longest, plus the AckWait of each
// delivery. Journal retention must exceed it.
func (p RetryPolicy) Horizon(maxDeliver int, ackWait time.Duration) time.Duration {
	var total time.Duration
	for n := 1; n < maxDeliver; n++ {
		_, hi := p.Bounds(n)
		total += hi + ackWait
	}
	return total
}

// Rules map safe error codes to classes: the rules block (docs/concepts.md). A code
// not listed keeps the class its adapter gave; an error of no known class is
// treated as reconcile_before_retry, the only safe guess.
type Rules struct {
	Retry                []string `mapstructure:"retry"`
	ReconcileBeforeRetry []string `mapstructure:"reconcile_before_retry"`
	NeverRetry           []string `mapstructure:"never_retry"`
}

// DefaultRules are the built-in rules, derived from adapters.DefaultClasses: every shared safe
// code with the class adapters.DefaultClasses gives it (the one table, which
// the adapters' own HTTP answers follow too). Only answers that prove the
// request was not processed are retried blindly; an answer that may come
// after the target committed — a gateway's 502 or 504, a 500 after the
// request was written, a timeout or a connection lost while waiting — is
// looked up by key first.
func DefaultRules() Rules {
	var r Rules
	for code, class := range adapters.DefaultClasses() {
		switch class {
		case adapters.Retry:
			r.Retry = append(r.Retry, code)
		case adapters.ReconcileBeforeRetry:
			r.ReconcileBeforeRetry = append(r.ReconcileBeforeRetry, code)
		case adapters.NeverRetry:
			r.NeverRetry = append(r.NeverRetry, code)
		}
	}
	slices.Sort(r.Retry)
	slices.Sort(r.ReconcileBeforeRetry)
	slices.Sort(r.NeverRetry)
	return r
}

// noLookupRules is laid over the rules for an adapter that cannot look up
// but whose target deduplicates by our key: an ambiguous gateway answer can
// then only be settled by sending the same key again. (An adapter that can
// do neither leaves it unknown, for an operator.)
func noLookupRules() Rules {
	return Rules{Retry: []string{adapters.CodeHTTP502, adapters.CodeHTTP504}}
}

// empty reports whether no code is listed.
func (r Rules) empty() bool {
	return len(r.Retry) == 0 && len(r.ReconcileBeforeRetry) == 0 && len(r.NeverRetry) == 0
}

// classifier is the compiled form of Rules.
type classifier map[string]adapters.Class

func (r Rules) compile() (classifier, error) {
	c := classifier{}
	add := func(codes []string, class adapters.Class) error {
		for _, code := range codes {
			if prev, ok := c[code]; ok && prev != class {
				return fmt.Errorf("rules: code %q is listed as both %s and %s", code, prev, class)
			}
			c[code] = class
		}
		return nil
	}
	if err := add(r.Retry, adapters.Retry); err != nil {
		return nil, err
	}
	if err := add(r.ReconcileBeforeRetry, adapters.ReconcileBeforeRetry); err != nil {
		return nil, err
	}
	if err := add(r.NeverRetry, adapters.NeverRetry); err != nil {
		return nil, err
	}
	return c, nil
}

// over returns c with the codes of o taking o's class (a per-target block
// merged over the global rules).
func (c classifier) over(o classifier) classifier {
	out := make(classifier, len(c)+len(o))
	for code, class := range c {
		out[code] = class
	}
	for code, class := range o {
		out[code] = class
	}
	return out
}

// rulesFor compiles the effective rules of one adapter: the global rules,
// the capability layer for a target that cannot be looked up, then the
// adapter's own block from rules_by_adapter.
func rulesFor(global Rules, byAdapter map[string]Rules, a adapters.Adapter) (classifier, error) {
	c, err := global.compile()
	if err != nil {
		return nil, err
	}
	if caps := a.Capabilities(); !caps.Lookup && caps.NativeKey {
		layer, _ := noLookupRules().compile()
		c = c.over(layer)
	}
	if own, ok := byAdapter[a.Name()]; ok {
		oc, err := own.compile()
		if err != nil {
			return nil, fmt.Errorf("rules_by_adapter.%s: %w", a.Name(), err)
		}
		c = c.over(oc)
	}
	return c, nil
}

// classify returns the class and safe code of an adapter error.
func (c classifier) classify(err error) (adapters.Class, *adapters.Error) {
	ae := adapters.AsError(err)
	if class, ok := c[ae.Code]; ok {
		return class, ae
	}
	if ae.Class.Valid() {
		return ae.Class, ae
	}
	return adapters.ReconcileBeforeRetry, ae
}
