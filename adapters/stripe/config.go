package stripe

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// Defaults of Config.
const (
	DefaultName         = "stripe"
	DefaultBaseURL      = "https://api.stripe.com"
	DefaultTimeout      = 30 * time.Second
	DefaultSecretKeyEnv = "STRIPE_SECRET_KEY"
	// DefaultSettleTime: the Search API is eventually consistent; objects
	// are searchable "in less than a minute" (Stripe's Search API docs [OK]).
	DefaultSettleTime = time.Minute
	// DefaultRefundMaxPages caps the refund list pages one Lookup reads.
	DefaultRefundMaxPages = 10
	// MaxKeyLen is Stripe's Idempotency-Key limit (255 characters, [OK]):
	// every operation key fits.
	MaxKeyLen = 255
)

// Stripe's published rate limits ([OK] docs.stripe.com/rate-limits):
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
	// HTTPConfig: name (default "stripe"), timeout (default 30s),
	// rate_limit (default: DefaultTestRateLimit for a test-mode key
	// sk_test_/rk_test_, else DefaultLiveRateLimit, chosen by New once the
	// key is read; YAML: rate_limit: {rate: 100, burst: 20}).
	adapters.HTTPConfig `mapstructure:",squash"`
	// BaseURL is the API root without /v1 (default https://api.stripe.com).
	BaseURL string `mapstructure:"base_url"`
	// SecretKey is the API key (sk_…): secret_key, else the file
	// secret_key_file, else the environment variable secret_key_env
	// (default STRIPE_SECRET_KEY).
	SecretKey adapters.SecretKey `mapstructure:",squash"`
	// APIVersion is sent as Stripe-Version when set (search needs
	// 2020-08-27 or later; default: the account's version).
	APIVersion string `mapstructure:"api_version"`
	// Account is sent as Stripe-Account (Connect) when set.
	Account string `mapstructure:"account"`
	// SettleTime is the search index lag a "not found" must wait out
	// (default 1m).
	SettleTime time.Duration `mapstructure:"settle_time"`
	// RefundMaxPages caps the refund pages (100 each) one Lookup reads
	// (default 10); past it the answer is Indeterminate.
	RefundMaxPages int `mapstructure:"refund_max_pages"`
}

// WithDefaults returns c with zero fields set to their defaults. The rate
// limit keeps its zero parts: their default depends on the key's mode, which
// New learns.
func (c Config) WithDefaults() Config {
	limit := c.RateLimit
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: DefaultName, Timeout: DefaultTimeout})
	c.RateLimit = limit
	c.BaseURL = adapters.TrimBaseURL(c.BaseURL, DefaultBaseURL)
	c.SecretKey.Env = cmp.Or(c.SecretKey.Env, DefaultSecretKeyEnv)
	c.SettleTime = cmp.Or(c.SettleTime, DefaultSettleTime)
	c.RefundMaxPages = cmp.Or(c.RefundMaxPages, DefaultRefundMaxPages)
	return c
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("stripe: invalid config")

// Validate checks the configuration (after WithDefaults).
func (c Config) Validate() error {
	if err := c.HTTPConfig.Validate("base_url", c.BaseURL); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.SettleTime < 0:
		return fmt.Errorf("%w: settle_time must not be negative", ErrInvalidConfig)
	case c.RefundMaxPages <= 0:
		return fmt.Errorf("%w: refund_max_pages must be positive", ErrInvalidConfig)
	case strings.ContainsAny(c.APIVersion+c.Account, "\r\n"):
		return fmt.Errorf("%w: api_version and account must be single-line", ErrInvalidConfig)
	}
	return nil
}
