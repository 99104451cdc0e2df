package yookassa

import (
	"cmp"
	"errors"
	"fmt"
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
	// HTTPConfig: name (default "yookassa"), timeout (default 30s; YooKassa
	// may take up to 30 s before it answers 500 "unknown", so keep it above
	// that in production), rate_limit (default DefaultRateLimit).
	adapters.HTTPConfig `mapstructure:",squash"`
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
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: DefaultName, Timeout: DefaultTimeout, RateLimit: DefaultRateLimit})
	c.BaseURL = adapters.TrimBaseURL(c.BaseURL, DefaultBaseURL)
	c.ShopIDEnv = cmp.Or(c.ShopIDEnv, DefaultShopIDEnv)
	c.SecretKeyEnv = cmp.Or(c.SecretKeyEnv, DefaultSecretKeyEnv)
	c.LookupWindow = cmp.Or(c.LookupWindow, DefaultLookupWindow)
	c.LookupMaxPages = cmp.Or(c.LookupMaxPages, DefaultLookupMaxPages)
	c.LookupSkew = cmp.Or(c.LookupSkew, DefaultLookupSkew)
	return c
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("yookassa: invalid config")

// Validate checks the configuration (after WithDefaults). It does not
// require the credentials to be resolved; New does.
func (c Config) Validate() error {
	if err := c.HTTPConfig.Validate("base_url", c.BaseURL); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
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
