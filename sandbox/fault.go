package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// FaultKind names a fault an emulator can inject.
type FaultKind string

// Fault kinds. "Before" kinds act before the target processes the request (no
// effect); "after commit" kinds let the target process it (the effect is
// recorded) and then spoil the response.
const (
	// FaultDelay waits Fault.Delay before processing the request normally.
	FaultDelay FaultKind = "delay"
	// FaultHTTP429 answers 429 with the target's error body and, when
	// Fault.RetryAfter is set, a Retry-After header in seconds. No effect.
	FaultHTTP429 FaultKind = "http_429"
	// FaultHTTP502 answers 502 (a proxy's answer: plain body). No effect.
	FaultHTTP502 FaultKind = "http_502"
	// FaultHTTP503 answers 503 with the target's error body (and Retry-After
	// when Fault.RetryAfter is set). No effect.
	FaultHTTP503 FaultKind = "http_503"
	// FaultResetBefore reads the request and resets the connection (TCP RST)
	// before the target processes it. No effect.
	FaultResetBefore FaultKind = "reset_before"
	// FaultIgnoreKey models a connector between us and the target that drops
	// our key: the target processes the request as if no key had been sent,
	// so a repeat creates a new object. The effect is recorded under the key
	// the client sent, with KeyIgnored set.
	FaultIgnoreKey FaultKind = "ignore_key"
	// FaultLoseResponseHang commits, then sends nothing until the client
	// gives up (its timeout closes the connection), the server closes, or
	// Options.MaxHang passes; then the connection is closed unanswered.
	FaultLoseResponseHang FaultKind = "lose_response_hang"
	// FaultLoseResponseClose commits, then closes the connection unanswered.
	FaultLoseResponseClose FaultKind = "lose_response_close"
	// FaultResetAfterCommit commits, then resets the connection (TCP RST).
	FaultResetAfterCommit FaultKind = "reset_after_commit"
	// FaultHTTP500AfterCommit commits, then answers 500 with the target's
	// error body (1C's "-1" after a failing handler, Stripe's cached 500).
	FaultHTTP500AfterCommit FaultKind = "http_500_after_commit"
	// FaultHTTP502AfterCommit commits, then a gateway in between answers 502
	// (plain body): the upstream took effect, the client cannot tell.
	FaultHTTP502AfterCommit FaultKind = "http_502_after_commit"
	// FaultTruncateAfterCommit commits, then sends the first half of the real
	// body with a matching Content-Length: a well-framed, truncated JSON.
	FaultTruncateAfterCommit FaultKind = "truncate_after_commit"
	// FaultRawResponse answers Fault.Status with Fault.Body verbatim (garbage,
	// a wrong status, HTML from a proxy). With Fault.Commit the target
	// processes the request first (effect recorded); without, it does not.
	FaultRawResponse FaultKind = "raw_response"
)

var faultKinds = map[FaultKind]bool{
	FaultDelay: true, FaultHTTP429: true, FaultHTTP502: true, FaultHTTP503: true,
	FaultResetBefore: true, FaultIgnoreKey: true, FaultLoseResponseHang: true,
	FaultLoseResponseClose: true, FaultResetAfterCommit: true,
	FaultHTTP500AfterCommit: true, FaultHTTP502AfterCommit: true, FaultTruncateAfterCommit: true,
	FaultRawResponse: true,
}

// Scope selects which requests a fault applies to. The emulator classifies
// each request (Spec.Classify).
type Scope string

// Scopes.
const (
	// ScopeCreate: requests that may create an object (the default).
	ScopeCreate Scope = "create"
	// ScopeRead: lookups, lists, gets.
	ScopeRead Scope = "read"
	// ScopeAny: every non-admin request.
	ScopeAny Scope = "any"
)

// Fault is one fault rule. Exactly one selection mode applies:
//   - Count > 0: the next Count matching requests;
//   - Rate in (0,1]: each matching request with probability Rate, drawn from
//     the emulator's seeded RNG (deterministic for a given Options.Seed and
//     request order), until cleared;
//   - neither: every matching request until cleared.
//
// When several rules match a request, the earliest injected one wins.
type Fault struct {
	Kind  FaultKind `json:"kind"`
	Scope Scope     `json:"scope,omitempty"`
	// Count is the number of matching requests to affect (0: see Rate).
	Count int `json:"count,omitempty"`
	// Rate is the probability per matching request, for rate faults.
	Rate float64 `json:"rate,omitempty"`
	// Delay is the wait of FaultDelay.
	Delay time.Duration `json:"-"`
	// RetryAfter is sent with FaultHTTP429/FaultHTTP503 (whole seconds,
	// rounded up). Zero: no Retry-After header.
	RetryAfter time.Duration `json:"-"`
	// Status and Body are the answer of FaultRawResponse.
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	// Commit makes FaultRawResponse process the request first.
	Commit bool `json:"commit,omitempty"`
	// DropKey sends the request through a connector that drops our key (as
	// FaultIgnoreKey does) before an after-commit fault spoils the answer:
	// the target commits without seeing the key.
	DropKey bool `json:"drop_key,omitempty"`
}

// faultWire is Fault's admin-API form: durations in milliseconds.
type faultWire struct {
	Kind         FaultKind `json:"kind"`
	Scope        Scope     `json:"scope,omitempty"`
	Count        int       `json:"count,omitempty"`
	Rate         float64   `json:"rate,omitempty"`
	DelayMS      int64     `json:"delay_ms,omitempty"`
	RetryAfterMS int64     `json:"retry_after_ms,omitempty"`
	Status       int       `json:"status,omitempty"`
	Body         string    `json:"body,omitempty"`
	Commit       bool      `json:"commit,omitempty"`
	DropKey      bool      `json:"drop_key,omitempty"`
	// Remaining is reported by GET /_sandbox/faults for count faults.
	Remaining int `json:"remaining,omitempty"`
}

// MarshalJSON encodes durations as delay_ms and retry_after_ms.
func (f Fault) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultWire{
		Kind: f.Kind, Scope: f.Scope, Count: f.Count, Rate: f.Rate,
		DelayMS: f.Delay.Milliseconds(), RetryAfterMS: f.RetryAfter.Milliseconds(),
		Status: f.Status, Body: f.Body, Commit: f.Commit, DropKey: f.DropKey,
	})
}

// UnmarshalJSON decodes the admin-API form (delay_ms, retry_after_ms).
func (f *Fault) UnmarshalJSON(b []byte) error {
	var w faultWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*f = Fault{
		Kind: w.Kind, Scope: w.Scope, Count: w.Count, Rate: w.Rate,
		Delay: time.Duration(w.DelayMS) * time.Millisecond, RetryAfter: time.Duration(w.RetryAfterMS) * time.Millisecond,
		Status: w.Status, Body: w.Body, Commit: w.Commit, DropKey: w.DropKey,
	}
	return nil
}

// ErrInvalidFault is returned for a fault rule that cannot be applied.
var ErrInvalidFault = errors.New("sandbox: invalid fault")

// Validate checks the rule.
func (f Fault) Validate() error {
	switch {
	case !faultKinds[f.Kind]:
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidFault, f.Kind)
	case f.Scope != "" && f.Scope != ScopeCreate && f.Scope != ScopeRead && f.Scope != ScopeAny:
		return fmt.Errorf("%w: unknown scope %q", ErrInvalidFault, f.Scope)
	case f.Count < 0:
		return fmt.Errorf("%w: negative count", ErrInvalidFault)
	case f.Rate < 0 || f.Rate > 1:
		return fmt.Errorf("%w: rate %v outside [0,1]", ErrInvalidFault, f.Rate)
	case f.Count > 0 && f.Rate > 0:
		return fmt.Errorf("%w: count and rate are exclusive", ErrInvalidFault)
	case f.Delay < 0 || f.RetryAfter < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidFault)
	case f.Kind == FaultDelay && f.Delay == 0:
		return fmt.Errorf("%w: delay fault without delay", ErrInvalidFault)
	case f.Kind == FaultRawResponse && (f.Status < 100 || f.Status > 999):
		return fmt.Errorf("%w: raw response status %d", ErrInvalidFault, f.Status)
	case f.DropKey && !f.Kind.afterCommit():
		return fmt.Errorf("%w: drop_key applies to after-commit faults only, not %q", ErrInvalidFault, f.Kind)
	}
	return nil
}

// afterCommit reports whether the target processes the request before the
// fault spoils its answer.
func (k FaultKind) afterCommit() bool {
	switch k {
	case FaultLoseResponseHang, FaultLoseResponseClose, FaultResetAfterCommit,
		FaultHTTP500AfterCommit, FaultHTTP502AfterCommit, FaultTruncateAfterCommit:
		return true
	}
	return false
}

func (f Fault) matches(s Scope) bool {
	switch f.Scope {
	case ScopeAny:
		return true
	case "", ScopeCreate:
		return s == ScopeCreate
	default:
		return f.Scope == s
	}
}

type faultRule struct {
	Fault
	remaining int
}

// faultSet holds the active rules and the seeded RNG of rate faults.
type faultSet struct {
	mu    sync.Mutex
	rules []*faultRule
	rng   *rand.Rand
	seed  uint64
}

func newFaultSet(seed uint64) *faultSet {
	return &faultSet{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed}
}

func (fs *faultSet) add(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.rules = append(fs.rules, &faultRule{Fault: f, remaining: f.Count})
	return nil
}

// pick returns the fault for a request in scope s, consuming one use of a
// count rule.
func (fs *faultSet) pick(s Scope) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, r := range fs.rules {
		if !r.matches(s) {
			continue
		}
		switch {
		case r.Count > 0:
			r.remaining--
			if r.remaining <= 0 {
				fs.rules = append(fs.rules[:i:i], fs.rules[i+1:]...)
			}
			return r.Fault, true
		case r.Rate > 0:
			if fs.rng.Float64() < r.Rate {
				return r.Fault, true
			}
		default:
			return r.Fault, true
		}
	}
	return Fault{}, false
}

func (fs *faultSet) list() []faultWire {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]faultWire, 0, len(fs.rules))
	for _, r := range fs.rules {
		out = append(out, faultWire{
			Kind: r.Kind, Scope: r.Scope, Count: r.Count, Rate: r.Rate,
			DelayMS: r.Delay.Milliseconds(), RetryAfterMS: r.RetryAfter.Milliseconds(),
			Status: r.Status, Body: r.Body, Commit: r.Commit, DropKey: r.DropKey, Remaining: r.remaining,
		})
	}
	return out
}

func (fs *faultSet) clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.rules = nil
	fs.rng = rand.New(rand.NewPCG(fs.seed, fs.seed^0x9e3779b97f4a7c15))
}
