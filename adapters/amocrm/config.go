package amocrm

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// Defaults of Config.
const (
	DefaultName     = "amocrm"
	DefaultTokenEnv = "IDEMGATE_AMOCRM_TOKEN"
	DefaultTimeout  = 30 * time.Second
	// DefaultSettleTime is the query search's lag [??]; the settle time is
	// at least twice Timeout too (see Config.SettleTime).
	DefaultSettleTime     = 30 * time.Second
	DefaultLookupSkew     = 5 * time.Minute
	DefaultLookupWindow   = 48 * time.Hour
	DefaultLookupMaxPages = 10
	DefaultMaxKeyLen      = 100
	// DefaultTaskTypeID is "Звонок" (1).
	DefaultTaskTypeID = 1
	// DefaultTaskDue is the due time of a task without a deadline.
	DefaultTaskDue = 24 * time.Hour
)

// DefaultRateLimit is amoCRM's 7 requests per second ([OK] Kommo's
// limitations page); the burst stays 2 below it so that
// requests arriving out of order never exceed it.
var DefaultRateLimit = adapters.RateLimit{Rate: 7, Burst: 5}

// Config configures the amoCRM adapter.
type Config struct {
	// HTTPConfig: name (default "amocrm"), timeout (default 30s),
	// rate_limit (default DefaultRateLimit).
	adapters.HTTPConfig `mapstructure:",squash"`
	// BaseURL is the account URL, e.g. https://example.amocrm.ru (required).
	BaseURL string `mapstructure:"base_url"`
	// Token is the OAuth access or long-lived token: token, else the file
	// token_file, else the environment variable token_env (default
	// IDEMGATE_AMOCRM_TOKEN).
	Token adapters.Token `mapstructure:",squash"`
	// KeyFieldID is the lead text custom field holding our key; 0 keeps the
	// key in a tag only.
	KeyFieldID int64 `mapstructure:"key_field_id"`
	// PipelineID is the pipeline of new leads (0: the account default).
	PipelineID int64 `mapstructure:"pipeline_id"`
	// TaskTypeID is the type of new tasks (default 1, a call).
	TaskTypeID int64 `mapstructure:"task_type_id"`
	// SettleTime is how long after an attempt began a "not found" may be
	// trusted: the query search's lag [??: unconfirmed], and a create the
	// account still holds (an owner that died or gave up) that lands later
	// and would make a second object (no documented bound [??]). Default:
	// the larger of 30s and twice Timeout (60s with the default timeout). A
	// negative value means 0.
	SettleTime time.Duration `mapstructure:"settle_time"`
	// LookupScan bounds the task scan (defaults 48h, 5m, 10 pages of 250).
	adapters.LookupScan `mapstructure:",squash"`
	// KeyInName appends the marker "[op:<key>]" to a lead's name (default
	// true): a connector that maps only standard fields drops the key field
	// and tags, and the name is then what the search finds the lead by.
	// false keeps names clean, and such leads cannot be found.
	KeyInName *bool `mapstructure:"key_in_name"`
	MaxKeyLen int   `mapstructure:"max_key_len"`
}

// WithDefaults returns c with zero fields set. A negative SettleTime means 0.
func (c Config) WithDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: DefaultName, Timeout: DefaultTimeout, RateLimit: DefaultRateLimit})
	c.BaseURL = adapters.TrimBaseURL(c.BaseURL, "")
	c.Token.Env = cmp.Or(c.Token.Env, DefaultTokenEnv)
	c.TaskTypeID = cmp.Or(c.TaskTypeID, DefaultTaskTypeID)
	c.SettleTime = adapters.SettleTime(c.SettleTime, max(DefaultSettleTime, 2*c.Timeout))
	c.LookupScan = c.LookupScan.WithDefaults(adapters.LookupScan{LookupWindow: DefaultLookupWindow, LookupSkew: DefaultLookupSkew, LookupMaxPages: DefaultLookupMaxPages})
	if c.KeyInName == nil {
		on := true
		c.KeyInName = &on
	}
	c.MaxKeyLen = cmp.Or(c.MaxKeyLen, DefaultMaxKeyLen)
	return c
}

// Secret is where the token comes from.
func (c Config) Secret() adapters.Credential { return adapters.Credential(c.Token) }

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("amocrm: invalid config")

// Validate checks the configuration (after WithDefaults).
func (c Config) Validate() error {
	if err := cmp.Or(c.HTTPConfig.Validate("base_url", c.BaseURL), c.LookupScan.Validate()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.KeyFieldID < 0 || c.PipelineID < 0 || c.TaskTypeID < 0:
		return fmt.Errorf("%w: ids must not be negative", ErrInvalidConfig)
	case c.MaxKeyLen < 16:
		return fmt.Errorf("%w: max_key_len must be at least 16", ErrInvalidConfig)
	}
	return nil
}
