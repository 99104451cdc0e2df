package onec

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
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
	// HTTPConfig: name (default "onec"), timeout (default 60s), rate_limit
	// (default none).
	adapters.HTTPConfig `mapstructure:",squash"`
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
	// Password is the user's password: password, else the file
	// password_file, else the environment variable password_env (default
	// IDEMGATE_ONEC_PASSWORD).
	Password adapters.Password `mapstructure:",squash"`
	// MaxKeyLen is the longest key the base stores (default 100).
	MaxKeyLen int `mapstructure:"max_key_len"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: DefaultName, Timeout: DefaultTimeout, RateLimit: DefaultRateLimit})
	c.BaseURL = adapters.TrimBaseURL(c.BaseURL, "")
	c.Mode = cmp.Or(c.Mode, ModeHTTPService)
	c.ServicePath = cmp.Or(c.ServicePath, DefaultServicePath)
	c.ODataPath = cmp.Or(c.ODataPath, DefaultODataPath)
	c.Document = cmp.Or(c.Document, DefaultDocument)
	c.KeyAttribute = cmp.Or(c.KeyAttribute, DefaultKeyAttribute)
	c.Password.Env = cmp.Or(c.Password.Env, DefaultPasswordEnv)
	c.MaxKeyLen = cmp.Or(c.MaxKeyLen, DefaultMaxKeyLen)
	return c
}

// Secret is where the user's password comes from.
func (c Config) Secret() adapters.Credential { return adapters.Credential(c.Password) }

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("onec: invalid config")

// Validate checks the configuration (after WithDefaults). Credentials are
// resolved by New.
func (c Config) Validate() error {
	if err := c.HTTPConfig.Validate("base_url", c.BaseURL); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.Mode != ModeHTTPService && c.Mode != ModeOData:
		return fmt.Errorf("%w: mode must be %q or %q", ErrInvalidConfig, ModeHTTPService, ModeOData)
	case c.User == "" || !adapters.BasicUserOK(c.User):
		return fmt.Errorf("%w: user is required and must not contain ':' or line breaks", ErrInvalidConfig)
	case c.MaxKeyLen < 16:
		return fmt.Errorf("%w: max_key_len must be at least 16", ErrInvalidConfig)
	case strings.ContainsAny(c.Document+c.KeyAttribute, " '/?#()"):
		return fmt.Errorf("%w: document and key_attribute must be plain OData names", ErrInvalidConfig)
	}
	return nil
}
