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
	DefaultName         = "yookassa"
	DefaultBaseURL      = "https://api.yookassa.ru"
	DefaultTimeout      = 30 * time.Second
	DefaultLookupWindow = 48 * time.Hour
	// DefaultLookupMaxPages: a round of a lookup reads at most 100 pages of
	// 100 payments; a longer window is read over the rounds that follow.
	DefaultLookupMaxPages = 100
	// DefaultLookupSkew is how far before the journal first saw a key a
	// lookup still looks: the journal's clock and YooKassa's may differ.
	DefaultLookupSkew = 5 * time.Minute
	// DefaultLookupLate is how long after the key's last call ended (plus
	// LookupSkew) a payment it made may still appear in the lists: a
	// request of ours reaches YooKassa at most a network delay after its
	// call gave up, and YooKassa settles a request within 30 seconds of
	// receiving it (an exact answer, or 500 and an attempt to cancel).
	DefaultLookupLate   = time.Minute
	DefaultShopIDEnv    = "YOOKASSA_SHOP_ID"
	DefaultSecretKeyEnv = "YOOKASSA_SECRET_KEY"
	// MaxKeyLen is the longest Idempotence-Key YooKassa accepts (64
	// characters: a third-party quote of the docs [3P]).
	// Longer operation keys are sent as adapters.TargetKey(key, 64), the hex
	// SHA-256 of the key; the full key always travels in metadata.
	MaxKeyLen = 64
	// KeyLifetime is how long YooKassa honours an Idempotence-Key after the
	// first request that carried it: a repeat within it gets the first
	// answer, a later one is a new request (YooKassa's docs [OK]).
	KeyLifetime = 24 * time.Hour
)

// DefaultRateLimit is none: YooKassa publishes no numeric limit
// [??]; it answers 429 (retry) when one is hit.
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
	// lookup_window (default 48h; how far back a lookup looks only when the
	// worker does not say when the journal first saw the key), lookup_skew
	// (default 5m: how far the journal's clock and YooKassa's may differ),
	// lookup_max_pages (pages of 100 one round of a lookup reads, default
	// 100; a window not read by then is Indeterminate this round, and the
	// next round goes on where this one stopped).
	adapters.LookupScan `mapstructure:",squash"`
	// LookupLate (lookup_late, default 1m): a lookup's window ends this
	// long (plus lookup_skew) after the key's last call ended; every
	// payment the key's calls made is in the lists by then, created
	// earlier. Once that end is past, what a round read is kept for the
	// next rounds whole; before, up to lookup_skew + lookup_late before
	// the read.
	LookupLate time.Duration `mapstructure:"lookup_late"`
	// ConnectorDropsKey (connector_drops_key, default false) declares that
	// something between the daemon and YooKassa may drop Idempotence-Key,
	// so one key may have made more than one payment: every lookup then
	// reads the calls' whole window (the oldest payment is the operation's,
	// the others are reported) and a retried create looks for duplicates.
	// Without it a lookup ends at the first payment carrying the key,
	// while the key's calls all fall within KeyLifetime of its first sight.
	ConnectorDropsKey bool `mapstructure:"connector_drops_key"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: DefaultName, Timeout: DefaultTimeout, RateLimit: DefaultRateLimit})
	c.BaseURL = adapters.TrimBaseURL(c.BaseURL, DefaultBaseURL)
	c.ShopIDEnv = cmp.Or(c.ShopIDEnv, DefaultShopIDEnv)
	c.SecretKey.Env = cmp.Or(c.SecretKey.Env, DefaultSecretKeyEnv)
	c.LookupScan = c.LookupScan.WithDefaults(adapters.LookupScan{LookupWindow: DefaultLookupWindow, LookupSkew: DefaultLookupSkew, LookupMaxPages: DefaultLookupMaxPages})
	c.LookupLate = cmp.Or(c.LookupLate, DefaultLookupLate)
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
	if c.LookupLate < 0 {
		return fmt.Errorf("%w: lookup_late must not be negative", ErrInvalidConfig)
	}
	if !adapters.BasicUserOK(c.ShopID) {
		return fmt.Errorf("%w: shop_id must not contain ':' or line breaks", ErrInvalidConfig)
	}
	return nil
}
