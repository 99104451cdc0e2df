package operation

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Approval modes of an operation type (ApprovalRule.Mode).
const (
	// ApprovalNone: the operation executes without a person's approval.
	ApprovalNone = "none"
	// ApprovalRequired: every intent waits for a person's approval.
	ApprovalRequired = "required"
	// ApprovalAbove: an intent waits when its amount is above the
	// threshold of its currency (ApprovalRule.Above); amounts at or below
	// it, and currencies without a threshold, need none.
	ApprovalAbove = "above"
)

// DefaultApprovalTTL is how long an intent waits for its approval unless
// configured otherwise: an approval not given by then ends the intent
// failed_final (approval_expired), nothing executed.
const DefaultApprovalTTL = 24 * time.Hour

// ErrApprovalPolicy is wrapped by every inconsistent approval policy: the
// daemon refuses to start with it (exit 78).
var ErrApprovalPolicy = errors.New("inconsistent approval policy")

// ApprovalRule is the approval policy of one operation type
// (approvals.types.<type> in the daemon's file). The zero value takes the
// built-in default: required for payment.charge and payment.refund, none
// for every other type.
type ApprovalRule struct {
	// Mode is none, required or above. "" means the built-in default.
	Mode string `mapstructure:"approval"`
	// Above maps a currency (ISO code, any case) to a threshold in minor
	// units: with Mode above, an intent whose amount exceeds it waits for
	// approval. At least one entry with Mode above, none otherwise.
	Above map[string]int64 `mapstructure:"above"`
	// Approvers is the number of distinct people whose approval an intent
	// needs. Default 1, at most 5.
	Approvers int `mapstructure:"approvers"`
	// TwoAbove maps a currency to a second, higher threshold: an intent
	// whose amount exceeds it needs two distinct approvers (four eyes),
	// whatever Approvers says. Optional; needs an amount field.
	TwoAbove map[string]int64 `mapstructure:"two_approvers_above"`
	// Groups are the approver groups allowed to decide this type; empty
	// means any approver. An approver outside every group is refused.
	Groups []string `mapstructure:"groups"`
	// TTL is the wait limit (approval_ttl). Default 24h, between 1s and 30 days.
	TTL time.Duration `mapstructure:"approval_ttl"`
}

// ApprovalPolicy is the approval policy of every operation type, built
// from configuration with CompileApprovalPolicy. The zero value (nil
// rules) gives the built-in defaults.
type ApprovalPolicy struct {
	rules map[string]ApprovalRule // effective, by type
	reg   *Registry
}

// Requirement is what an intent needs before it may execute.
type Requirement struct {
	// Required: the intent waits for approval (awaiting_approval).
	Required bool
	// Approvers is the number of distinct approvers needed (1 or more).
	Approvers int
	// Groups may decide it (empty: any approver).
	Groups []string
	// TTL is the wait limit.
	TTL time.Duration
}

var groupName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// defaultMode is the built-in mode of a type: money moves wait
// (payment.charge, payment.refund, and declared types marked
// approval_required).
func (p *ApprovalPolicy) defaultMode(typ string) string {
	if typ == TypePaymentCharge || typ == TypePaymentRefund {
		return ApprovalRequired
	}
	if p != nil && p.reg != nil {
		if t, ok := p.reg.Lookup(typ); ok && t.RequiresApproval {
			return ApprovalRequired
		}
	}
	return ApprovalNone
}

// CompileApprovalPolicy checks rules (by operation type) against reg and
// fills the defaults. Every error wraps ErrApprovalPolicy and names the
// key to change: an unknown type, an unknown mode, thresholds without mode
// above (or above without thresholds), a threshold on a type without an
// amount and currency field, a bad currency or a negative threshold, a
// second threshold at or below the first, a bad group name, approvers
// outside 1..5, a TTL outside 1s..30 days.
func CompileApprovalPolicy(rules map[string]ApprovalRule, reg *Registry) (*ApprovalPolicy, error) {
	if reg == nil {
		reg = DefaultRegistry()
	}
	p := &ApprovalPolicy{rules: map[string]ApprovalRule{}, reg: reg}
	var errs []error
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		r := rules[name]
		at := "approvals.types." + name
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("%w: %s: %s", ErrApprovalPolicy, at, fmt.Sprintf(format, a...)))
		}
		typ, ok := reg.Lookup(name)
		if !ok {
			bad("unknown operation type")
			continue
		}
		if r.Mode == "" {
			r.Mode = p.defaultMode(name)
		}
		switch r.Mode {
		case ApprovalNone, ApprovalRequired, ApprovalAbove:
		default:
			bad("approval %q: none, required or above", r.Mode)
		}
		money := hasField(typ, "amount_minor", KindMoney) && hasField(typ, "currency", KindCurrency)
		if r.Mode == ApprovalAbove && len(r.Above) == 0 {
			bad("approval: above needs thresholds (above: {RUB: 5000000})")
		}
		if r.Mode != ApprovalAbove && len(r.Above) > 0 {
			bad("above: thresholds need approval: above (it is %q)", r.Mode)
		}
		if (len(r.Above) > 0 || len(r.TwoAbove) > 0) && !money {
			bad("a threshold needs the type to have amount_minor (money) and currency fields")
		}
		if r.Mode == ApprovalNone && (len(r.TwoAbove) > 0 || r.Approvers != 0 || len(r.Groups) > 0 || r.TTL != 0) {
			bad("approval: none takes no approvers, groups, thresholds or approval_ttl")
		}
		r.Above = upperKeys(r.Above, at+".above", bad)
		r.TwoAbove = upperKeys(r.TwoAbove, at+".two_approvers_above", bad)
		for cur, two := range r.TwoAbove {
			if one, ok := r.Above[cur]; ok && two <= one {
				bad("two_approvers_above.%s %d must exceed above.%s %d", cur, two, cur, one)
			}
		}
		if r.Approvers == 0 {
			r.Approvers = 1
		}
		if r.Approvers < 1 || r.Approvers > 5 {
			bad("approvers %d: between 1 and 5", r.Approvers)
		}
		for _, g := range r.Groups {
			if !groupName.MatchString(g) {
				bad("group %q: [a-z][a-z0-9_-]{0,63}", g)
			}
		}
		if r.TTL == 0 {
			r.TTL = DefaultApprovalTTL
		}
		if r.TTL < time.Second || r.TTL > 30*24*time.Hour {
			bad("approval_ttl %v: between 1s and 720h", r.TTL)
		}
		p.rules[name] = r
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

func upperKeys(m map[string]int64, at string, bad func(string, ...any)) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m))
	for cur, v := range m {
		u := strings.ToUpper(cur)
		if len(u) != 3 || strings.Trim(u, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			bad("%s.%s: a currency is three letters", at, cur)
		}
		if v < 0 {
			bad("%s.%s: %d: a threshold in minor units is 0 or more", at, cur, v)
		}
		if _, dup := out[u]; dup {
			bad("%s: currency %s given twice", at, u)
		}
		out[u] = v
	}
	return out
}

func hasField(t Type, name string, kind FieldKind) bool {
	return slices.ContainsFunc(t.Fields, func(f Field) bool { return f.Name == name && f.Kind == kind && !f.Insignificant })
}

// Rule returns the effective rule of an operation type.
func (p *ApprovalPolicy) Rule(typ string) ApprovalRule {
	if p != nil {
		if r, ok := p.rules[typ]; ok {
			return r
		}
	}
	r := ApprovalRule{Mode: p.defaultMode(typ), Approvers: 1, TTL: DefaultApprovalTTL}
	if r.Mode == ApprovalNone {
		r.Approvers, r.TTL = 0, 0
	}
	return r
}

// Requires decides what op needs before it may execute. An above rule
// compares the intent's normalised amount (minor units) with its
// currency's threshold; a currency without one waits (a threshold missing
// from the file never lets money through).
func (p *ApprovalPolicy) Requires(op Operation) Requirement {
	r := p.Rule(op.Type)
	amount, _ := op.Fields["amount_minor"].(int64)
	cur, _ := op.Fields["currency"].(string)
	switch r.Mode {
	case ApprovalRequired:
	case ApprovalAbove:
		// A currency without a threshold waits: a threshold missing from
		// the file never lets money through.
		if limit, ok := r.Above[cur]; ok && amount <= limit {
			return Requirement{}
		}
	default:
		return Requirement{}
	}
	need := r.Approvers
	if two, ok := r.TwoAbove[cur]; ok && amount > two && need < 2 {
		need = 2
	}
	return Requirement{Required: true, Approvers: need, Groups: r.Groups, TTL: r.TTL}
}

// MaxTTL is the longest wait limit of any type: how long a parked command
// must stay in JetStream.
func (p *ApprovalPolicy) MaxTTL() time.Duration {
	out := DefaultApprovalTTL
	if p != nil {
		for _, r := range p.rules {
			out = max(out, r.TTL)
		}
	}
	return out
}

// ApprovalWait is what a pending result says about an intent that waits
// for a person's approval.
type ApprovalWait struct {
	// URL is where a person sees exactly what is approved and decides
	// ("" when no console address is configured).
	URL string `json:"url,omitempty"`
	// ExpiresAt ends the wait: no decision by then ends the intent
	// failed_final (approval_expired), nothing executed.
	ExpiresAt time.Time `json:"expires_at"`
	// Approvers is the number of distinct approvers needed; Approved how
	// many have approved so far.
	Approvers int `json:"approvers"`
	Approved  int `json:"approved"`
}
