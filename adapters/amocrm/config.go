package amocrm

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
	DefaultName           = "amocrm"
	DefaultTokenEnv       = "IDEMGATE_AMOCRM_TOKEN"
	DefaultTimeout        = 30 * time.Second
	DefaultSettleTime     = 30 * time.Second
	DefaultLookupWindow   = 48 * time.Hour
	DefaultLookupMaxPages = 10
	DefaultMaxKeyLen      = 100
	// DefaultTaskTypeID is "Звонок" (1).
	DefaultTaskTypeID = 1
	// DefaultTaskDue is the due time of a task without a deadline.
	DefaultTaskDue = 24 * time.Hour
)

// Config configures the amoCRM adapter.
type Config struct {
	Name string `mapstructure:"name"`
	// BaseURL is the account URL, e.g. https://example.amocrm.ru (required).
	BaseURL string `mapstructure:"base_url"`
	// Token is the OAuth access or long-lived token; when empty it is read
	// from TokenFile, else from the environment variable TokenEnv (default
	// IDEMGATE_AMOCRM_TOKEN).
	Token     redact.Secret `mapstructure:"token"`
	TokenFile string        `mapstructure:"token_file"`
	TokenEnv  string        `mapstructure:"token_env"`
	// KeyFieldID is the lead text custom field holding our key; 0 keeps the
	// key in a tag only.
	KeyFieldID int64 `mapstructure:"key_field_id"`
	// PipelineID is the pipeline of new leads (0: the account default).
	PipelineID int64 `mapstructure:"pipeline_id"`
	// TaskTypeID is the type of new tasks (default 1, a call).
	TaskTypeID int64 `mapstructure:"task_type_id"`
	// SettleTime is the query-search lag a "not found" must wait out (default 30s).
	SettleTime time.Duration `mapstructure:"settle_time"`
	// LookupWindow and LookupMaxPages bound the task scan (defaults 48h, 10).
	LookupWindow   time.Duration `mapstructure:"lookup_window"`
	LookupMaxPages int           `mapstructure:"lookup_max_pages"`
	Timeout        time.Duration `mapstructure:"timeout"`
	MaxKeyLen      int           `mapstructure:"max_key_len"`

	Logger *slog.Logger        `mapstructure:"-"`
	Clock  func() time.Time    `mapstructure:"-"`
	Getenv func(string) string `mapstructure:"-"`
}

// WithDefaults returns c with zero fields set. A negative SettleTime means 0.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.TokenEnv == "" {
		c.TokenEnv = DefaultTokenEnv
	}
	if c.TaskTypeID == 0 {
		c.TaskTypeID = DefaultTaskTypeID
	}
	switch {
	case c.SettleTime == 0:
		c.SettleTime = DefaultSettleTime
	case c.SettleTime < 0:
		c.SettleTime = 0
	}
	if c.LookupWindow == 0 {
		c.LookupWindow = DefaultLookupWindow
	}
	if c.LookupMaxPages == 0 {
		c.LookupMaxPages = DefaultLookupMaxPages
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
var ErrInvalidConfig = errors.New("amocrm: invalid config")

// Validate checks the configuration (after WithDefaults).
func (c Config) Validate() error {
	_, ok := adapters.ValidBaseURL(c.BaseURL)
	switch {
	case !ok:
		return fmt.Errorf("%w: base_url must be an http(s) URL without credentials", ErrInvalidConfig)
	case c.KeyFieldID < 0 || c.PipelineID < 0 || c.TaskTypeID < 0:
		return fmt.Errorf("%w: ids must not be negative", ErrInvalidConfig)
	case c.Timeout <= 0 || c.LookupWindow <= 0 || c.LookupMaxPages <= 0:
		return fmt.Errorf("%w: timeout, lookup_window and lookup_max_pages must be positive", ErrInvalidConfig)
	case c.MaxKeyLen < 16:
		return fmt.Errorf("%w: max_key_len must be at least 16", ErrInvalidConfig)
	}
	return nil
}
