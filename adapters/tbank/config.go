package tbank

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
// acquiring API (TARGETS.md §6, [??]).
var DefaultRateLimit = adapters.RateLimit{}

// Config configures the T-Bank adapter. Zero fields take the defaults above.
type Config struct {
	// Name is the adapter instance name (default "tbank").
	Name string `mapstructure:"name"`
	// BaseURL is the API root without /v2 (default
	// https://securepay.tinkoff.ru; test contour https://rest-api-test.tinkoff.ru).
	BaseURL string `mapstructure:"base_url"`
	// TerminalKey identifies the terminal; when empty it is read from the
	// environment variable TerminalKeyEnv (default TBANK_TERMINAL_KEY).
	TerminalKey    string `mapstructure:"terminal_key"`
	TerminalKeyEnv string `mapstructure:"terminal_key_env"`
	// Password signs requests (Token). When empty it is read from
	// PasswordFile, else from the environment variable PasswordEnv (default
	// TBANK_PASSWORD).
	Password     redact.Secret `mapstructure:"password"`
	PasswordFile string        `mapstructure:"password_file"`
	PasswordEnv  string        `mapstructure:"password_env"`
	// Timeout bounds one HTTP exchange (default 30s).
	Timeout time.Duration `mapstructure:"timeout"`
	// OrderIDUnique declares that the terminal refuses a repeated OrderId on
	// Init (ErrorCode "8"). Unconfirmed for every terminal (TARGETS.md §9.6;
	// one integrator reports it [3P]): default false, so the adapter declares
	// SingleFlight (the journal serialises creation per key) rather than
	// NativeKey. Either way Execute looks the OrderId up before Init.
	OrderIDUnique bool `mapstructure:"order_id_unique"`

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
	if c.TerminalKeyEnv == "" {
		c.TerminalKeyEnv = DefaultTerminalKeyEnv
	}
	if c.PasswordEnv == "" {
		c.PasswordEnv = DefaultPasswordEnv
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
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
var ErrInvalidConfig = errors.New("tbank: invalid config")

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
	}
	return nil
}
