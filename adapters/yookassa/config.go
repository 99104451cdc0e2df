package yookassa

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
	DefaultName           = "yookassa"
	DefaultBaseURL        = "https://api.yookassa.ru"
	DefaultTimeout        = 30 * time.Second
	DefaultLookupWindow   = 48 * time.Hour
	DefaultLookupMaxPages = 20
	// DefaultLookupSkew is how far before the journal first saw a key a
	// lookup still looks: the journal's clock and YooKassa's may differ.
	DefaultLookupSkew   = 5 * time.Minute
	DefaultShopIDEnv    = "YOOKASSA_SHOP_ID"
	DefaultSecretKeyEnv = "YOOKASSA_SECRET_KEY"
	// MaxKeyLen is the longest Idempotence-Key YooKassa accepts (64
	// characters: a third-party quote of the docs, TARGETS.md §5, [3P]).
	// Longer operation keys are sent as adapters.TargetKey(key, 64), the hex
	// SHA-256 of the key; the full key always travels in metadata.
	MaxKeyLen = 64
)

// DefaultRateLimit is none: YooKassa publishes no numeric limit
// (TARGETS.md §5, [??]); it answers 429 (retry) when one is hit.
var DefaultRateLimit = adapters.RateLimit{}

// Config configures the YooKassa adapter. Zero fields take the defaults
// above (WithDefaults).
type Config struct {
	// Name is the adapter instance name (default "yookassa").
	Name string `mapstructure:"name"`
	// BaseURL is the API root without /v3 (default https://api.yookassa.ru).
	BaseURL string `mapstructure:"base_url"`
	// ShopID is the shop identifier (Basic user). When empty it is read from
	// the environment variable ShopIDEnv (default YOOKASSA_SHOP_ID).
	ShopID    string `mapstructure:"shop_id"`
	ShopIDEnv string `mapstructure:"shop_id_env"`
	// SecretKey is the API secret (Basic password). When empty it is read
	// from SecretKeyFile, else from the environment variable SecretKeyEnv
	// (default YOOKASSA_SECRET_KEY).
	SecretKey     redact.Secret `mapstructure:"secret_key"`
	SecretKeyFile string        `mapstructure:"secret_key_file"`
	SecretKeyEnv  string        `mapstructure:"secret_key_env"`
	// Timeout bounds one HTTP exchange (default 30s). YooKassa may take up
	// to 30 s before it answers 500 "unknown", so keep it above that in
	// production.
	Timeout time.Duration `mapstructure:"timeout"`
	// TwoStage sends capture:false (the payment stops at
	// waiting_for_capture). Default false: one-stage capture:true.
	TwoStage bool `mapstructure:"two_stage"`
	// LookupWindow is how far back Lookup scans the payment or refund list
	// for our key (default 48h: the 24h idempotence window plus slack).
	LookupWindow time.Duration `mapstructure:"lookup_window"`
	// LookupMaxPages caps the pages (100 items each) one Lookup reads; when
	// reached without a match the answer is Indeterminate (default 20).
	LookupMaxPages int `mapstructure:"lookup_max_pages"`
	// LookupSkew: when the worker tells when the journal first saw the key,
	// the scan starts that long before it instead of LookupWindow ago
	// (default 5m; nothing for the key can have been sent earlier).
	LookupSkew time.Duration `mapstructure:"lookup_skew"`

	// RateLimit is the client-side token bucket for this account: every
	// request waits for a slot (bounded by the call) instead of meeting the
	// target's limit (default DefaultRateLimit; a negative rate turns it
	// off). YAML: rate_limit: {rate: 2, burst: 40}.
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
	if c.ShopIDEnv == "" {
		c.ShopIDEnv = DefaultShopIDEnv
	}
	if c.SecretKeyEnv == "" {
		c.SecretKeyEnv = DefaultSecretKeyEnv
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.LookupWindow == 0 {
		c.LookupWindow = DefaultLookupWindow
	}
	if c.LookupMaxPages == 0 {
		c.LookupMaxPages = DefaultLookupMaxPages
	}
	if c.LookupSkew == 0 {
		c.LookupSkew = DefaultLookupSkew
	}
	c.RateLimit = c.RateLimit.WithDefaults(DefaultRateLimit)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("yookassa: invalid config")

// Validate checks the configuration (after WithDefaults). It does not
// require the credentials to be resolved; New does.
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
	case c.LookupWindow <= 0:
		return fmt.Errorf("%w: lookup_window must be positive", ErrInvalidConfig)
	case c.LookupSkew < 0:
		return fmt.Errorf("%w: lookup_skew must not be negative", ErrInvalidConfig)
	case c.LookupMaxPages <= 0:
		return fmt.Errorf("%w: lookup_max_pages must be positive", ErrInvalidConfig)
	case strings.ContainsAny(c.ShopID, ":\r\n"):
		return fmt.Errorf("%w: shop_id must not contain ':' or line breaks", ErrInvalidConfig)
	}
	return nil
}
