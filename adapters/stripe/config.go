package stripe

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/redact"
)

// Defaults of Config.
const (
	DefaultName         = "stripe"
	DefaultBaseURL      = "https://api.stripe.com"
	DefaultTimeout      = 30 * time.Second
	DefaultSecretKeyEnv = "STRIPE_SECRET_KEY"
	// DefaultSettleTime: the Search API is eventually consistent; objects
	// are searchable "in less than a minute" (TARGETS.md §7, [OK]).
	DefaultSettleTime = time.Minute
	// DefaultRefundMaxPages caps the refund list pages one Lookup reads.
	DefaultRefundMaxPages = 10
	// MaxKeyLen is Stripe's Idempotency-Key limit (255 characters, [OK]):
	// every operation key fits.
	MaxKeyLen = 255
)

// Stripe's published rate limits (TARGETS.md §7, [OK] docs.stripe.com/rate-limits):
// live mode 100 read and 100 write operations per second, test mode 25 and
// 25. One bucket holds reads and writes together, so it stays at the lower
// figure; the burst is a fifth of a second's worth [??: Stripe does not
// describe its bucket]. The Search API's own 20 reads per second is more
// than the one search a Lookup makes needs.
var (
	DefaultLiveRateLimit = adapters.RateLimit{Rate: 100, Burst: 20}
	DefaultTestRateLimit = adapters.RateLimit{Rate: 25, Burst: 5}
)

// Config configures the Stripe adapter. Zero fields take the defaults above.
type Config struct {
	// Name is the adapter instance name (default "stripe").
	Name string `mapstructure:"name"`
	// BaseURL is the API root without /v1 (default https://api.stripe.com).
	BaseURL string `mapstructure:"base_url"`
	// SecretKey is the API key (sk_…); when empty it is read from
	// SecretKeyFile, else from the environment variable SecretKeyEnv
	// (default STRIPE_SECRET_KEY).
	SecretKey     redact.Secret `mapstructure:"secret_key"`
	SecretKeyFile string        `mapstructure:"secret_key_file"`
	SecretKeyEnv  string        `mapstructure:"secret_key_env"`
	// APIVersion is sent as Stripe-Version when set (search needs
	// 2020-08-27 or later; default: the account's version).
	APIVersion string `mapstructure:"api_version"`
	// Account is sent as Stripe-Account (Connect) when set.
	Account string `mapstructure:"account"`
	// Timeout bounds one HTTP exchange (default 30s).
	Timeout time.Duration `mapstructure:"timeout"`
	// SettleTime is the search index lag a "not found" must wait out
	// (default 1m).
	SettleTime time.Duration `mapstructure:"settle_time"`
	// RefundMaxPages caps the refund pages (100 each) one Lookup reads
	// (default 10); past it the answer is Indeterminate.
	RefundMaxPages int `mapstructure:"refund_max_pages"`
	// RateLimit is the client-side token bucket for this account: every
	// request waits for a slot (bounded by the call) instead of meeting
	// Stripe's 429 (default: DefaultTestRateLimit for a test-mode key
	// sk_test_/rk_test_, else DefaultLiveRateLimit; a negative rate turns it
	// off). YAML: rate_limit: {rate: 100, burst: 20}.
	RateLimit adapters.RateLimit `mapstructure:"rate_limit"`

	// Logger, Clock and Getenv are injected (defaults: discard, time.Now,
	// os.Getenv).
	Logger *slog.Logger        `mapstructure:"-"`
	Clock  func() time.Time    `mapstructure:"-"`
	Getenv func(string) string `mapstructure:"-"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.SecretKeyEnv == "" {
		c.SecretKeyEnv = DefaultSecretKeyEnv
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.SettleTime == 0 {
		c.SettleTime = DefaultSettleTime
	}
	if c.RefundMaxPages == 0 {
		c.RefundMaxPages = DefaultRefundMaxPages
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("stripe: invalid config")

// Validate checks the configuration (after WithDefaults).
func (c Config) Validate() error {
	_, ok := adapters.ValidBaseURL(c.BaseURL)
	if err := c.RateLimit.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: base_url must be an http(s) URL without credentials", ErrInvalidConfig)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout must be positive", ErrInvalidConfig)
	case c.SettleTime < 0:
		return fmt.Errorf("%w: settle_time must not be negative", ErrInvalidConfig)
	case c.RefundMaxPages <= 0:
		return fmt.Errorf("%w: refund_max_pages must be positive", ErrInvalidConfig)
	case strings.ContainsAny(c.APIVersion+c.Account, "\r\n"):
		return fmt.Errorf("%w: api_version and account must be single-line", ErrInvalidConfig)
	}
	return nil
}
