package bitrix24

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
)

// Config configures the Bitrix24 adapter.
type Config struct {
	Name string `mapstructure:"name"`
	// PortalURL is the portal root, e.g. https://example.bitrix24.ru (required).
	PortalURL string `mapstructure:"portal_url"`
	// UserID is the webhook's user id (required).
	UserID string `mapstructure:"user_id"`
	// WebhookCode is the webhook's secret code; when empty it is read from
	// WebhookCodeFile, else from the environment variable WebhookCodeEnv
	// (default IDEMGATE_BITRIX24_WEBHOOK_CODE).
	WebhookCode     redact.Secret `mapstructure:"webhook_code"`
	WebhookCodeFile string        `mapstructure:"webhook_code_file"`
	WebhookCodeEnv  string        `mapstructure:"webhook_code_env"`
	// OriginatorID is our system's id in ORIGINATOR_ID (default "idemgate").
	OriginatorID string `mapstructure:"originator_id"`
	// ActivityTypeID and OwnerTypeID shape crm.task.create (defaults 3, 3).
	ActivityTypeID int `mapstructure:"activity_type_id"`
	OwnerTypeID    int `mapstructure:"owner_type_id"`
	// SettleTime is how long a "not found" list needs to be trusted
	// (default 0: lists read the database [??]).
	SettleTime time.Duration `mapstructure:"settle_time"`
	Timeout    time.Duration `mapstructure:"timeout"`
	MaxKeyLen  int           `mapstructure:"max_key_len"`

	Logger *slog.Logger        `mapstructure:"-"`
	Clock  func() time.Time    `mapstructure:"-"`
	Getenv func(string) string `mapstructure:"-"`
}

// WithDefaults returns c with zero fields set.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	c.PortalURL = strings.TrimRight(c.PortalURL, "/")
	if c.WebhookCodeEnv == "" {
		c.WebhookCodeEnv = DefaultWebhookCodeEnv
	}
	if c.OriginatorID == "" {
		c.OriginatorID = DefaultOriginatorID
	}
	if c.ActivityTypeID == 0 {
		c.ActivityTypeID = DefaultActivityTypeID
	}
	if c.OwnerTypeID == 0 {
		c.OwnerTypeID = DefaultOwnerTypeID
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxKeyLen == 0 {
		c.MaxKeyLen = DefaultMaxKeyLen
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("bitrix24: invalid config")

// Validate checks the configuration (after WithDefaults).
func (c Config) Validate() error {
	u, ok := adapters.ValidBaseURL(c.PortalURL)
	switch {
	case !ok || (u.Path != "" && u.Path != "/"):
		return fmt.Errorf("%w: portal_url must be an http(s) portal root without path or credentials", ErrInvalidConfig)
	case c.UserID == "" || strings.ContainsAny(c.UserID, "/?#% "):
		return fmt.Errorf("%w: user_id is required and must be a plain id", ErrInvalidConfig)
	case c.Timeout <= 0 || c.SettleTime < 0:
		return fmt.Errorf("%w: timeout must be positive, settle_time not negative", ErrInvalidConfig)
	case c.MaxKeyLen < 16:
		return fmt.Errorf("%w: max_key_len must be at least 16", ErrInvalidConfig)
	}
	return nil
}
