package bitrix24

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// Defaults of Config.
const (
	DefaultName           = "bitrix24"
	DefaultOriginatorID   = "idemgate"
	DefaultWebhookCodeEnv = "IDEMGATE_BITRIX24_WEBHOOK_CODE"
	DefaultTimeout        = 30 * time.Second
	// DefaultMaxKeyLen is the safe side of ORIGIN_ID's length [??: not
	// documented]; longer keys are sent as adapters.TargetKey(key, 100).
	DefaultMaxKeyLen = 100
	// DefaultActivityTypeID is the CRM activity type of crm.task.create (3: task).
	DefaultActivityTypeID = 3
	// DefaultOwnerTypeID is the owner type of customer_id (3: contact).
	DefaultOwnerTypeID = 3
	// DefaultLookupWindow, DefaultLookupSkew and DefaultLookupMaxPages bound
	// the marker scan: objects created since LookupSkew before the journal
	// first saw the key (LookupWindow ago when the worker does not say), 50
	// per page.
	DefaultLookupWindow   = 24 * time.Hour
	DefaultLookupSkew     = 5 * time.Minute
	DefaultLookupMaxPages = 10
)

// DefaultRateLimit keeps under the portal's leaky bucket (Bitrix24's
// REST documentation, limits.md [OK]: 50 requests, leaking 2 per second, on every plan but
// Enterprise, which has 250 and 5/s: raise it there). The burst stays
// 10 below the bucket so that requests arriving out of order never
// overflow it.
var DefaultRateLimit = adapters.RateLimit{Rate: 2, Burst: 40}

// Config configures the Bitrix24 adapter.
type Config struct {
	// HTTPConfig: name (default "bitrix24"), timeout (default 30s),
	// rate_limit (default DefaultRateLimit).
	adapters.HTTPConfig `mapstructure:",squash"`
	// PortalURL is the portal root, e.g. https://example.bitrix24.ru (required).
	PortalURL string `mapstructure:"portal_url"`
	// UserID is the webhook's user id (required).
	UserID string `mapstructure:"user_id"`
	// WebhookCode is the webhook's secret code: webhook_code, else the file
	// webhook_code_file, else the environment variable webhook_code_env
	// (default IDEMGATE_BITRIX24_WEBHOOK_CODE).
	WebhookCode adapters.WebhookCode `mapstructure:",squash"`
	// OriginatorID is our system's id in ORIGINATOR_ID (default "idemgate").
	OriginatorID string `mapstructure:"originator_id"`
	// ActivityTypeID and OwnerTypeID shape crm.task.create (defaults 3, 3).
	ActivityTypeID int `mapstructure:"activity_type_id"`
	OwnerTypeID    int `mapstructure:"owner_type_id"`
	// SettleTime is how long after an attempt began a "not found" may be
	// trusted. Lists read the database [??], but an add the portal still
	// holds (a request queued behind others, from an owner that died or
	// gave up) lands later and would make a second object. Bitrix24
	// documents no bound on that time [??]; the default is twice Timeout
	// (60s with the default timeout). A negative value means 0.
	SettleTime time.Duration `mapstructure:"settle_time"`
	// LookupScan bounds the marker scan (defaults 24h, 5m, 10 pages of 50).
	adapters.LookupScan `mapstructure:",squash"`
	MaxKeyLen           int `mapstructure:"max_key_len"`
}

// WithDefaults returns c with zero fields set.
func (c Config) WithDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: DefaultName, Timeout: DefaultTimeout, RateLimit: DefaultRateLimit})
	c.PortalURL = adapters.TrimBaseURL(c.PortalURL, "")
	c.WebhookCode.Env = cmp.Or(c.WebhookCode.Env, DefaultWebhookCodeEnv)
	c.OriginatorID = cmp.Or(c.OriginatorID, DefaultOriginatorID)
	c.ActivityTypeID = cmp.Or(c.ActivityTypeID, DefaultActivityTypeID)
	c.OwnerTypeID = cmp.Or(c.OwnerTypeID, DefaultOwnerTypeID)
	c.SettleTime = adapters.SettleTime(c.SettleTime, 2*c.Timeout)
	c.LookupScan = c.LookupScan.WithDefaults(adapters.LookupScan{LookupWindow: DefaultLookupWindow, LookupSkew: DefaultLookupSkew, LookupMaxPages: DefaultLookupMaxPages})
	c.MaxKeyLen = cmp.Or(c.MaxKeyLen, DefaultMaxKeyLen)
	return c
}

// Secret is where the webhook code comes from.
func (c Config) Secret() adapters.Credential { return adapters.Credential(c.WebhookCode) }

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("bitrix24: invalid config")

// Validate checks the configuration (after WithDefaults).
func (c Config) Validate() error {
	if err := cmp.Or(c.HTTPConfig.Validate("portal_url", c.PortalURL), c.LookupScan.Validate()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch u, _ := url.Parse(c.PortalURL); {
	case u.Path != "" && u.Path != "/":
		return fmt.Errorf("%w: portal_url must be a portal root, without a path", ErrInvalidConfig)
	case c.UserID == "" || strings.ContainsAny(c.UserID, "/?#% "):
		return fmt.Errorf("%w: user_id is required and must be a plain id", ErrInvalidConfig)
	case c.SettleTime < 0:
		return fmt.Errorf("%w: settle_time must not be negative", ErrInvalidConfig)
	case c.MaxKeyLen < 16:
		return fmt.Errorf("%w: max_key_len must be at least 16", ErrInvalidConfig)
	}
	return nil
}
