package tbank

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// Defaults of Config.
const (
	DefaultName           = "tbank"
	DefaultBaseURL        = "https://securepay.tinkoff.ru"
	DefaultTimeout        = 30 * time.Second
	DefaultTerminalKeyEnv = "TBANK_TERMINAL_KEY"
	DefaultPasswordEnv    = "TBANK_PASSWORD"
	// MaxKeyLen is the longest OrderId T-Bank accepts (36 characters, [3P]).
	// Longer operation keys (most: "prod:payment.charge:…:v1" is already
	// 38) are sent as adapters.TargetKey(key, 36), the first 36 hex digits
	// of the key's SHA-256; the same mapping applies to ExternalRequestId.
	MaxKeyLen = 36
)

// DefaultRateLimit is none: T-Bank publishes no rate limit for the
// acquiring API [??].
var DefaultRateLimit = adapters.RateLimit{}

// Config configures the T-Bank adapter. Zero fields take the defaults above.
type Config struct {
	// HTTPConfig: name (default "tbank"), timeout (default 30s),
	// rate_limit (default none).
	adapters.HTTPConfig `mapstructure:",squash"`
	// BaseURL is the API root without /v2 (default
	// https://securepay.tinkoff.ru; test contour https://rest-api-test.tinkoff.ru).
	BaseURL string `mapstructure:"base_url"`
	// TerminalKey identifies the terminal; when empty it is read from the
	// environment variable TerminalKeyEnv (default TBANK_TERMINAL_KEY).
	TerminalKey    string `mapstructure:"terminal_key"`
	TerminalKeyEnv string `mapstructure:"terminal_key_env"`
	// Password signs requests (Token): password, else the file
	// password_file, else the environment variable password_env (default
	// TBANK_PASSWORD).
	Password adapters.Password `mapstructure:",squash"`
	// OrderIDUnique declares that the terminal refuses a repeated OrderId on
	// Init (ErrorCode "8"). Unconfirmed for every terminal (docs/targets.md, research notes;
	// one integrator reports it [3P]): default false, so the adapter declares
	// SingleFlight (the journal serialises creation per key) rather than
	// NativeKey. Either way Execute looks the OrderId up before Init.
	OrderIDUnique bool `mapstructure:"order_id_unique"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: DefaultName, Timeout: DefaultTimeout, RateLimit: DefaultRateLimit})
	c.BaseURL = adapters.TrimBaseURL(c.BaseURL, DefaultBaseURL)
	c.TerminalKeyEnv = cmp.Or(c.TerminalKeyEnv, DefaultTerminalKeyEnv)
	c.Password.Env = cmp.Or(c.Password.Env, DefaultPasswordEnv)
	return c
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("tbank: invalid config")

// Validate checks the configuration (after WithDefaults).
func (c Config) Validate() error {
	if err := c.HTTPConfig.Validate("base_url", c.BaseURL); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
