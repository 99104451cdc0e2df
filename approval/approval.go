package approval

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// Display is what an approver sees of op: the operation, its target and
// its significant fields (normalised: amounts in minor units, currency
// upper case), each masked as every face masks values (redact.Value). An
// insignificant field (free text among them) never appears.
func Display(op operation.Operation) (json.RawMessage, error) {
	m := make(map[string]any, len(op.Fields)+2)
	for name, v := range op.Fields {
		m[name] = redact.Value(v)
	}
	m["operation"] = op.Type
	m["target_system"] = op.TargetSystem
	return json.Marshal(m)
}

// Approver is one person allowed to decide, as configured
// (approvals.approvers).
type Approver struct {
	// Name identifies the person in the trail: [a-z0-9._@-], 1-64 bytes.
	Name string `mapstructure:"name"`
	// Token is the approver's bearer token for the HTTP API (Authorization:
	// Bearer …). Never an agent's token.
	Token redact.Secret `mapstructure:"token"`
	// Groups the approver belongs to (a type's policy may name groups).
	Groups []string `mapstructure:"groups"`
}

var approverName = regexp.MustCompile(`^[a-z0-9._@-]{1,64}$`)

// ErrConfig wraps every inconsistent approvers' configuration.
var ErrConfig = errors.New("inconsistent approvers")

// ValidateApprovers checks the approvers against the policy: distinct
// names and tokens, every group a type names held by at least one approver
// (else nobody could ever approve that type), and no approver token equal
// to one of agentTokens (separation of duties).
func ValidateApprovers(as []Approver, policy *operation.ApprovalPolicy, types []string, agentTokens ...string) error {
	var errs []error
	names, tokens, groups := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, a := range as {
		at := fmt.Sprintf("approvals.approvers[%d]", i)
		if !approverName.MatchString(a.Name) {
			errs = append(errs, fmt.Errorf("%w: %s: name %q: [a-z0-9._@-]{1,64}", ErrConfig, at, a.Name))
		}
		if names[a.Name] {
			errs = append(errs, fmt.Errorf("%w: %s: name %q given twice", ErrConfig, at, a.Name))
		}
		names[a.Name] = true
		tok := a.Token.Reveal()
		if tok != "" {
			if len(tok) < 16 {
				errs = append(errs, fmt.Errorf("%w: %s (%s): token shorter than 16 characters", ErrConfig, at, a.Name))
			}
			if tokens[tok] {
				errs = append(errs, fmt.Errorf("%w: %s (%s): token shared with another approver", ErrConfig, at, a.Name))
			}
			if slices.Contains(agentTokens, tok) {
				errs = append(errs, fmt.Errorf("%w: %s (%s): token is an agent's token; an agent can never approve", ErrConfig, at, a.Name))
			}
			tokens[tok] = true
		}
		for _, g := range a.Groups {
			groups[g] = true
		}
	}
	sort.Strings(types)
	for _, typ := range types {
		for _, g := range policy.Rule(typ).Groups {
			if !groups[g] {
				errs = append(errs, fmt.Errorf("%w: approvals.types.%s: group %q has no approver in approvals.approvers: nobody could approve it", ErrConfig, typ, g))
			}
		}
	}
	return errors.Join(errs...)
}

// Service decides approvals: the one entry of every face.
type Service struct {
	Store     journal.Store
	Policy    *operation.ApprovalPolicy
	Approvers []Approver
}

// ErrNotApprover: the person is not allowed to decide this operation (no
// such approver, or outside the type's groups).
var ErrNotApprover = errors.New("approval: not an approver of this operation")

// ByToken returns the approver holding token.
func (s *Service) ByToken(token string) (Approver, bool) {
	if token == "" {
		return Approver{}, false
	}
	for _, a := range s.Approvers {
		if !a.Token.IsZero() && subtle.ConstantTimeCompare([]byte(a.Token.Reveal()), []byte(token)) == 1 {
			return a, true
		}
	}
	return Approver{}, false
}

// Decide records who's vote on key. who must be a configured approver
// when the type's policy names groups (and then be in one of them).
func (s *Service) Decide(ctx context.Context, who string, key string, vote journal.Vote, reason string) (journal.Approval, error) {
	return s.DecideShown(ctx, who, key, "", vote, reason)
}

// DecideShown is Decide for a person who was shown the request with
// fingerprint shown (a page's): the decision is refused if the record
// waits for another one. "" checks nothing (Decide).
func (s *Service) DecideShown(ctx context.Context, who, key, shown string, vote journal.Vote, reason string) (journal.Approval, error) {
	a, err := s.Store.Approval(ctx, key)
	if err != nil && !errors.Is(err, journal.ErrNotFound) {
		return a, err
	}
	if err == nil {
		if groups := s.Policy.Rule(a.OperationType).Groups; len(groups) > 0 {
			idx := slices.IndexFunc(s.Approvers, func(ap Approver) bool { return ap.Name == who })
			if idx < 0 || !slices.ContainsFunc(s.Approvers[idx].Groups, func(g string) bool { return slices.Contains(groups, g) }) {
				return a, fmt.Errorf("%w: %s needs an approver of group %v; %s is not one", ErrNotApprover, a.OperationType, groups, who)
			}
		}
	}
	return s.Store.DecideApproval(ctx, journal.ApprovalDecision{Key: key, Vote: vote, Approver: who, Reason: reason, RequestHash: shown})
}
