package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// approvalsConfig is the approvals: section.
type approvalsConfig struct {
	// Enabled gates intents by the policy: with it, payment.charge and
	// payment.refund wait for a person by default (Types may say
	// otherwise). Default false.
	Enabled bool `mapstructure:"enabled"`
	// Types is the policy per operation type (operation.ApprovalRule);
	// a type left out takes the built-in default.
	Types map[string]operation.ApprovalRule `mapstructure:"types"`
	// Approvers are the people who decide, with their HTTP API tokens and
	// groups.
	Approvers []approval.Approver `mapstructure:"approvers"`
	// SweepInterval is how often waits are expired and decisions carried
	// out. Default 1s.
	SweepInterval time.Duration `mapstructure:"sweep_interval"`
	// URL is the base of the approval links handed to agents
	// ("https://idemgate.example/ui/approvals/"; the key is appended,
	// escaped). "" gives no link.
	URL string `mapstructure:"url"`
}

func (a approvalsConfig) policy(reg *operation.Registry) (*operation.ApprovalPolicy, error) {
	return operation.CompileApprovalPolicy(a.Types, reg)
}

func (a approvalsConfig) url(key string) string {
	if a.URL == "" {
		return ""
	}
	return a.URL + url.PathEscape(key)
}

// parkedMaxAge keeps a parked command past the longest wait limit, with
// an hour for the sweeper to carry the decision out.
func parkedMaxAge(p *operation.ApprovalPolicy) time.Duration { return p.MaxTTL() + time.Hour }

// validateApprovals refuses an inconsistent approvals: section (exit 78).
func (c Config) validateApprovals() []error {
	reg, err := c.registry()
	if err != nil {
		return nil // reported by validate
	}
	var errs []error
	policy, err := c.Approvals.policy(reg)
	if err != nil {
		return []error{err}
	}
	if c.Approvals.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("approvals.sweep_interval %v: 0 (default 1s) or more", c.Approvals.SweepInterval))
	}
	if c.Approvals.URL != "" {
		if u, err := url.Parse(c.Approvals.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("approvals.url %q: an http(s) URL", c.Approvals.URL))
		}
	}
	if err := approval.ValidateApprovers(c.Approvals.Approvers, policy, reg.Names(),
		c.HTTPAPI.Token.Reveal(), c.MCP.Listener.Token.Reveal()); err != nil {
		errs = append(errs, err)
	}
	if c.Approvals.Enabled && c.NATS.CommandsMaxAge > 0 && c.Journal.Retention < policy.MaxTTL() {
		errs = append(errs, fmt.Errorf("unsafe: journal.retention %v is shorter than the longest approval_ttl %v", c.Journal.Retention, policy.MaxTTL()))
	}
	return errs
}

// approveCmd is `idemgate approve KEY --reason …` and `idemgate deny KEY
// --reason …`: one person's decision, recorded in the journal; the daemon
// carries it out (approved: executes once; denied: failed_final).
func approveCmd(stdout io.Writer, vote journal.Vote) *cobra.Command {
	var reason, who string
	verb := "approve"
	short := "Approve an intent that awaits a person's approval; the daemon then executes it once"
	if vote == journal.VoteDeny {
		verb = "deny"
		short = "Deny an intent that awaits a person's approval; it ends failed_final (approval_denied), nothing executed"
	}
	cmd := &cobra.Command{
		Use:   verb + " KEY --reason TEXT",
		Short: short,
		Long: short + `.
The decision covers exactly the request shown by 'idemgate trace KEY' (its fingerprint).
The person who submitted the command cannot decide it; a type that needs two approvers
needs two different people; approving twice, after a denial, after the wait limit, or
an operation that is not waiting is refused with the reason.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return &exitError{code: exitUsage, err: fmt.Errorf("%s needs --reason", verb)}
			}
			c, st, err := openForTools(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if who == "" {
				who = os.Getenv("USER")
			}
			reg, err := c.registry()
			if err != nil {
				return configError(err)
			}
			policy, err := c.Approvals.policy(reg)
			if err != nil {
				return configError(err)
			}
			svc := &approval.Service{Store: st, Policy: policy, Approvers: c.Approvals.Approvers}
			a, err := svc.Decide(cmd.Context(), who, args[0], vote, reason)
			switch {
			case errors.Is(err, journal.ErrNotFound):
				return &exitError{code: exitUnknown, err: err}
			case errors.Is(err, journal.ErrInvalid):
				return &exitError{code: exitUsage, err: err}
			case errors.Is(err, journal.ErrApprovalRefused), errors.Is(err, approval.ErrNotApprover):
				return &exitError{code: exitConflict, err: err}
			case err != nil:
				return err
			}
			fmt.Fprintf(stdout, "%s: %s by %s (%d of %d approvals); state %s\n", a.Key, verb, who, a.Approved(), a.Approvers, a.State)
			if a.State != journal.ApprovalPending {
				fmt.Fprintln(stdout, "the daemon carries the decision out at its next approvals sweep")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept in the trail, masked)")
	cmd.Flags().StringVar(&who, "as", "", "who decides (default $USER); must not be who submitted the command")
	return cmd
}
