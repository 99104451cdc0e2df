package yookassa

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/adapters"
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
	// SecretKey is the API secret (Basic password): secret_key, else the
	// file secret_key_file, else the environment variable secret_key_env
	// (default YOOKASSA_SECRET_KEY).
	SecretKey adapters.SecretKey `mapstructure:",squash"`
	// TwoStage sends capture:false (the payment stops at
	// waiting_for_capture). Default false: one-stage capture:true.
	TwoStage bool `mapstructure:"two_stage"`
	// LookupScan bounds the scan of the payment or refund list for our key:
	// lookup_window (default 48h: the 24h idempotence window plus slack),
	// lookup_skew (default 5m), lookup_max_pages (pages of 100, default 20;
	// reached without a match the answer is Indeterminate).
	adapters.LookupScan `mapstructure:",squash"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: DefaultName, Timeout: DefaultTimeout, RateLimit: DefaultRateLimit})
	c.BaseURL = adapters.TrimBaseURL(c.BaseURL, DefaultBaseURL)
	c.ShopIDEnv = cmp.Or(c.ShopIDEnv, DefaultShopIDEnv)
	c.SecretKey.Env = cmp.Or(c.SecretKey.Env, DefaultSecretKeyEnv)
	c.LookupScan = c.LookupScan.WithDefaults(adapters.LookupScan{LookupWindow: DefaultLookupWindow, LookupSkew: DefaultLookupSkew, LookupMaxPages: DefaultLookupMaxPages})
	return c
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("yookassa: invalid config")

// Validate checks the configuration (after WithDefaults). It does not
// require the credentials to be resolved; New does.
func (c Config) Validate() error {
	if err := cmp.Or(c.HTTPConfig.Validate("base_url", c.BaseURL), c.LookupScan.Validate()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if !adapters.BasicUserOK(c.ShopID) {
		return fmt.Errorf("%w: shop_id must not contain ':' or line breaks", ErrInvalidConfig)
	}
	return nil
}
