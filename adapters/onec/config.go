package onec

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/redact"
)

// Modes of the adapter.
const (
	ModeHTTPService = "http_service"
	ModeOData       = "odata"
)

// DefaultRateLimit is none: 1C is the customer's own server, with no
// published limit; set one to protect a small base.
var DefaultRateLimit = adapters.RateLimit{}

// Defaults of Config.
const (
	DefaultName         = "onec"
	DefaultServicePath  = "/hs/integration"
	DefaultODataPath    = "/odata/standard.odata"
	DefaultDocument     = "Document_СчетНаОплатуПокупателю"
	DefaultKeyAttribute = "ВнешнийКлюч"
	DefaultPasswordEnv  = "IDEMGATE_ONEC_PASSWORD"
	// DefaultTimeout is long: 1C commonly takes over 30 s to post a document.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxKeyLen is the key register's dimension length, String(100).
	// Longer operation keys are sent as adapters.TargetKey(key, 100).
	DefaultMaxKeyLen = 100
)

// Config configures the 1C adapter. Zero fields take the defaults above.
type Config struct {
	// Name is the adapter instance name (default "onec").
	Name string `mapstructure:"name"`
	// BaseURL is the infobase publication root, e.g.
	// https://1c.example.com/accounting (required).
	BaseURL string `mapstructure:"base_url"`
	// Mode is ModeHTTPService (default) or ModeOData.
	Mode string `mapstructure:"mode"`
	// ServicePath is the HTTP service root under BaseURL (default /hs/integration).
	ServicePath string `mapstructure:"service_path"`
	// ODataPath is the OData root under BaseURL (default /odata/standard.odata).
	ODataPath string `mapstructure:"odata_path"`
	// Document is the OData entity set of invoices.
	Document string `mapstructure:"document"`
	// KeyAttribute is the extension attribute holding our key (OData mode).
	KeyAttribute string `mapstructure:"key_attribute"`
	// User is the infobase user (HTTP Basic, required).
	User string `mapstructure:"user"`
	// Password is the user's password; when empty it is read from
	// PasswordFile, else from the environment variable PasswordEnv (default
	// IDEMGATE_ONEC_PASSWORD).
	Password     redact.Secret `mapstructure:"password"`
	PasswordFile string        `mapstructure:"password_file"`
	PasswordEnv  string        `mapstructure:"password_env"`
	// Timeout bounds one HTTP exchange (default 60s).
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxKeyLen is the longest key the base stores (default 100).
	MaxKeyLen int `mapstructure:"max_key_len"`

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
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Mode == "" {
		c.Mode = ModeHTTPService
	}
	if c.ServicePath == "" {
		c.ServicePath = DefaultServicePath
	}
	if c.ODataPath == "" {
		c.ODataPath = DefaultODataPath
	}
	if c.Document == "" {
		c.Document = DefaultDocument
	}
	if c.KeyAttribute == "" {
		c.KeyAttribute = DefaultKeyAttribute
	}
	if c.PasswordEnv == "" {
		c.PasswordEnv = DefaultPasswordEnv
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxKeyLen == 0 {
		c.MaxKeyLen = DefaultMaxKeyLen
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
var ErrInvalidConfig = errors.New("onec: invalid config")

// Validate checks the configuration (after WithDefaults). Credentials are
// resolved by New.
func (c Config) Validate() error {
	_, ok := adapters.ValidBaseURL(c.BaseURL)
	if err := c.RateLimit.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: base_url must be an http(s) URL without credentials", ErrInvalidConfig)
	case c.Mode != ModeHTTPService && c.Mode != ModeOData:
		return fmt.Errorf("%w: mode must be %q or %q", ErrInvalidConfig, ModeHTTPService, ModeOData)
	case c.User == "" || strings.ContainsAny(c.User, ":\r\n"):
		return fmt.Errorf("%w: user is required and must not contain ':' or line breaks", ErrInvalidConfig)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout must be positive", ErrInvalidConfig)
	case c.MaxKeyLen < 16:
		return fmt.Errorf("%w: max_key_len must be at least 16", ErrInvalidConfig)
	case strings.ContainsAny(c.Document+c.KeyAttribute, " '/?#()"):
		return fmt.Errorf("%w: document and key_attribute must be plain OData names", ErrInvalidConfig)
	}
	return nil
}
