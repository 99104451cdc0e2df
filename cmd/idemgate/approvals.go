package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/worker"
)

// approvalsConfig is the approvals: section.
type approvalsConfig struct {
	// Enabled gates intents by the policy: with it, payment.charge and
	// payment.refund wait for a person by default (Types may say
	// otherwise). Default true: letting an agent move money on its own is
	// a decision a configuration states (enabled: false, or approval: none
	// per type), never one it inherits.
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
	// BaseURL is where people reach the console ("https://idemgate.example"):
	// each waiting intent's pending answer links its approval page,
	// BaseURL + "/ui/approval?key=<key>". Default: the admin listener's
	// address when the console is on (http://<admin.addr>); "" and no
	// console give no link.
	BaseURL string `mapstructure:"base_url"`
	// URL, when set, is a link prefix of your own that the key is appended
	// to (escaped), in place of the console's page: an approval portal of
	// yours. It wins over BaseURL.
	URL string `mapstructure:"url"`
	// Tokens are the issuers of pre-signed approval tokens and their keys
	// (approval.TokenConfig); none: a command carrying a token is rejected.
	Tokens approval.TokenConfig `mapstructure:"tokens"`
	// Notify announces each approval request as a signed HTTP POST.
	Notify notifyConfig `mapstructure:"notify"`
}

// notifyConfig is approvals.notify: where approval requests are POSTed
// (a chat bridge, a ticketing hook), signed with a shared secret.
type notifyConfig struct {
	// URL receives the POSTs; "" announces nothing. https, or http on
	// loopback.
	URL string `mapstructure:"url"`
	// SecretFile or SecretEnv holds the shared secret (32 bytes or more)
	// that signs each POST (Idemgate-Signature, HMAC-SHA256).
	SecretFile string `mapstructure:"secret_file"`
	SecretEnv  string `mapstructure:"secret_env"`
	// Timeout bounds one POST. Default 10s.
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxAttempts bounds the deliveries of one notification (1s, 2s, 4s …
	// apart, at most 5 minutes). Default 10.
	MaxAttempts int `mapstructure:"max_attempts"`
}

// minNotifySecret is the shortest shared secret accepted.
const minNotifySecret = 32

// notifier returns the notifier's configuration with its secret read, or
// ok false when nothing is announced.
func (n notifyConfig) notifier(getenv func(string) string) (cfg worker.NotifierConfig, ok bool, err error) {
	if n.URL == "" {
		return cfg, false, nil
	}
	u, perr := url.Parse(n.URL)
	if perr != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname()))) {
		return cfg, false, fmt.Errorf("approvals.notify.url: an https URL (http only on loopback)")
	}
	var secret string
	switch {
	case n.SecretFile != "" && n.SecretEnv != "":
		return cfg, false, fmt.Errorf("approvals.notify: one of secret_file, secret_env")
	case n.SecretFile != "":
		b, rerr := os.ReadFile(n.SecretFile)
		if rerr != nil {
			return cfg, false, fmt.Errorf("approvals.notify.secret_file: %w", rerr)
		}
		secret = strings.TrimSpace(string(b))
	case n.SecretEnv != "":
		secret = getenv(n.SecretEnv)
		if secret == "" {
			return cfg, false, fmt.Errorf("approvals.notify.secret_env %s is unset", n.SecretEnv)
		}
	default:
		return cfg, false, fmt.Errorf("approvals.notify: a url needs secret_file or secret_env (the POSTs are signed)")
	}
	if len(secret) < minNotifySecret {
		return cfg, false, fmt.Errorf("approvals.notify: the secret is shorter than %d bytes", minNotifySecret)
	}
	if n.Timeout < 0 || n.MaxAttempts < 0 || n.MaxAttempts > 100 {
		return cfg, false, fmt.Errorf("approvals.notify: timeout 0 (10s) or more, max_attempts 0 (10) to 100")
	}
	return worker.NotifierConfig{URL: n.URL, Secret: redact.Secret(secret), Timeout: n.Timeout, MaxAttempts: n.MaxAttempts}.WithDefaults(), true, nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// approvalPage is the console's approval page of a key, under a base URL.
func approvalPage(base, key string) string {
	return strings.TrimSuffix(base, "/") + "/ui/approval?key=" + url.QueryEscape(key)
}

// approvalLinks returns the approval link of a key, or nil when there is
// none to give (no url, no base_url, no console).
func (c Config) approvalLinks() func(string) string {
	a := c.Approvals
	switch {
	case a.URL != "":
		return a.url
	case a.BaseURL != "":
		return func(k string) string { return approvalPage(a.BaseURL, k) }
	case c.Console.Enabled && c.Admin.Addr != "":
		base := "http://" + c.Admin.Addr
		return func(k string) string { return approvalPage(base, k) }
	}
	return nil
}

// gatewayApprovalURL is the link the faces put in the answer of an intent
// that waits for a person (nil with approvals off or no link to give).
func (c Config) gatewayApprovalURL() func(string) string {
	if !c.Approvals.Enabled {
		return nil
	}
	return c.approvalLinks()
}

// tokenVerifier loads the approval tokens' keys (nil when no issuer is
// configured).
func (a approvalsConfig) tokenVerifier() (*approval.Verifier, error) {
	if !a.Tokens.Enabled() {
		return nil, nil
	}
	return approval.NewVerifier(a.Tokens, os.Getenv)
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
	if c.Approvals.BaseURL != "" {
		if u, err := url.Parse(c.Approvals.BaseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("approvals.base_url %q: an http(s) URL without a query", c.Approvals.BaseURL))
		}
	}
	// The tokens' keys are loaded, and so checked, only with approvals on
	// (as the daemon then uses them).
	if c.Approvals.Enabled && c.Approvals.Tokens.Enabled() {
		if _, err := approval.NewVerifier(c.Approvals.Tokens, os.Getenv); err != nil {
			errs = append(errs, err)
		}
		life := c.Approvals.Tokens.MaxLifetime
		if life == 0 {
			life = approval.DefaultTokenMaxLifetime
		}
		if c.Journal.Retention > 0 && c.Journal.Retention < life {
			errs = append(errs, fmt.Errorf("unsafe: journal.retention %v is shorter than approvals.tokens.max_lifetime %v: a token's jti could approve a second intent once the first is purged", c.Journal.Retention, life))
		}
		for _, is := range c.Approvals.Tokens.Issuers {
			for _, ap := range c.Approvals.Approvers {
				if ap.Name == is.Name {
					errs = append(errs, fmt.Errorf("approvals.tokens.issuers: %s is also an approver's name: the trail could not tell a token from the person", is.Name))
				}
			}
		}
	}
	if err := approval.ValidateApprovers(c.Approvals.Approvers, policy, reg.Names(),
		c.HTTPAPI.Token.Reveal(), c.MCP.Listener.Token.Reveal()); err != nil {
		errs = append(errs, err)
	}
	if c.Approvals.Enabled {
		if _, _, err := c.Approvals.Notify.notifier(os.Getenv); err != nil {
			errs = append(errs, err)
		}
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
	verb, done := "approve", "approved"
	short := "Approve an intent that awaits a person's approval; the daemon then executes it once"
	if vote == journal.VoteDeny {
		verb, done = "deny", "denied"
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
			fmt.Fprintf(stdout, "%s: %s by %s (%d of %d approvals); state %s\n", a.Key, done, who, a.Approved(), a.Approvers, a.State)
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
