package adapters

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/redact"
)

// HTTPConfig is the part of a target adapter's configuration that every HTTP
// adapter shares, with the same meaning, defaults and checks: the instance
// name, the exchange timeout, the account's client-side rate limit, and the
// injected logger, clock and environment. Each adapter's Config embeds it
// squashed (`mapstructure:",squash"`), so its keys sit beside the adapter's
// own (adapters.yookassa.timeout), the way pgx.ConnConfig embeds
// pgconn.Config; the adapter adds only what differs.
//
// The target's root URL stays with each adapter: it is named and shaped as
// the target names it (base_url; Bitrix24's portal_url is a portal root
// under which the webhook path carries the credential), and checked by
// ValidBaseURL. So are the credentials (see Credential): their keys carry
// the target's word for them (secret_key, token, password, webhook_code).
type HTTPConfig struct {
	// Name is the adapter instance name (default: the target's name). Routes
	// name adapters by it.
	Name string `mapstructure:"name"`
	// Timeout bounds one HTTP exchange (default: the adapter's, 30s for most
	// targets, 60s for 1C).
	Timeout time.Duration `mapstructure:"timeout"`
	// RateLimit is the client-side token bucket for this account: every
	// request waits for a slot (bounded by the call) instead of meeting the
	// target's limit (default: the adapter's DefaultRateLimit, its target's
	// published limit or none; a negative rate turns it off).
	// YAML: rate_limit: {rate: 2, burst: 40}.
	RateLimit RateLimit `mapstructure:"rate_limit"`

	// MaxInFlight is how many calls may run at once toward this account:
	// the client opens at most that many connections and keeps them all
	// idle for the next calls (default DefaultIdleConns), so a steady load
	// reuses its connections instead of dialing one per call. The binary sets it to worker.max_in_flight.
	MaxInFlight int `mapstructure:"-"`
	// Metrics counts the connections the client opens (nil: not counted).
	Metrics *Metrics `mapstructure:"-"`

	// Logger, Clock and Getenv are injected (defaults: discard, time.Now,
	// os.Getenv).
	Logger *slog.Logger        `mapstructure:"-"`
	Clock  func() time.Time    `mapstructure:"-"`
	Getenv func(string) string `mapstructure:"-"`
}

// HTTP returns c itself. A Config that embeds HTTPConfig has the method
// too, so the binary reaches the shared part of any adapter's Config to
// inject the logger, the in-flight bound and the metrics.
func (c *HTTPConfig) HTTP() *HTTPConfig { return c }

// WithDefaults returns c with a zero Name, Timeout or RateLimit part taken
// from def (the adapter's defaults) and the injected fields defaulted.
func (c HTTPConfig) WithDefaults(def HTTPConfig) HTTPConfig {
	c.Name = cmp.Or(c.Name, def.Name)
	c.Timeout = cmp.Or(c.Timeout, def.Timeout)
	c.RateLimit = c.RateLimit.WithDefaults(def.RateLimit)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// Validate checks c after WithDefaults, and the target's root URL rawURL,
// which the adapter's configuration holds under urlKey (see ValidBaseURL).
// Its errors name the keys; each adapter wraps them in its own
// ErrInvalidConfig.
func (c HTTPConfig) Validate(urlKey, rawURL string) error {
	if err := c.RateLimit.Validate(); err != nil {
		return err
	}
	if _, ok := ValidBaseURL(rawURL); !ok {
		return fmt.Errorf("%s must be an http(s) URL without credentials", urlKey)
	}
	if c.Timeout <= 0 {
		return errors.New("timeout must be positive")
	}
	return nil
}

// Load loads cred through the injected Getenv.
func (c HTTPConfig) Load(cred Credential) (redact.Secret, error) {
	return cred.Load(c.Getenv)
}

// Configured is how every adapter's New starts: cfg with its defaults,
// validated (Validate's error as it is).
func Configured[C interface {
	WithDefaults() C
	Validate() error
}](cfg C) (C, error) {
	cfg = cfg.WithDefaults()
	return cfg, cfg.Validate()
}

// SecretConfig is the Config of an adapter whose account has one secret and
// nothing else to load.
type SecretConfig[C any] interface {
	WithDefaults() C
	Validate() error
	// Secret says where the secret comes from, once the defaults are in.
	Secret() Credential
	// Load is HTTPConfig's.
	Load(Credential) (redact.Secret, error)
}

// ConfiguredSecret is Configured, then the secret loaded. A load error goes
// through wrap, which words it the adapter's way (see Wrapping).
func ConfiguredSecret[C SecretConfig[C]](cfg C, wrap func(error) error) (C, redact.Secret, error) {
	cfg, err := Configured(cfg)
	if err != nil {
		return cfg, "", err
	}
	secret, err := cfg.Load(cfg.Secret())
	if err != nil {
		return cfg, "", wrap(err)
	}
	return cfg, secret, nil
}

// Wrapping returns a func that wraps an error as fmt.Errorf(format,
// args..., err): format ends with the %w of that error.
func Wrapping(format string, args ...any) func(error) error {
	return func(err error) error { return fmt.Errorf(format, append(args, err)...) }
}

// NewClient returns the account's Client: the timeout, the rate limit and
// authorize (nil: none), which adds the account's credentials to every
// request the Client sends.
func (c HTTPConfig) NewClient(authorize func(*http.Request)) *Client {
	var dialed func()
	if c.Metrics != nil {
		opened := c.Metrics.opened.WithLabelValues(c.Name)
		dialed = opened.Inc
	}
	cl := newClient(newHTTPClient(c.Timeout, cmp.Or(c.MaxInFlight, DefaultIdleConns), dialed), c.RateLimit)
	cl.authorize = authorize
	return cl
}

// ValidBaseURL parses a target's base URL: http or https, with a host and
// without credentials (those come from their own settings, never the URL,
// where logs and errors would show them).
func ValidBaseURL(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, false
	}
	return u, true
}

// TrimBaseURL returns raw, or def when raw is empty, without trailing
// slashes: adapters append paths that start with one.
func TrimBaseURL(raw, def string) string {
	return strings.TrimRight(cmp.Or(raw, def), "/")
}

// LookupScan bounds a Lookup that cannot ask the target for a key and scans
// its objects by creation time instead (YooKassa, Bitrix24, amoCRM tasks).
// An adapter's Config embeds it squashed, with its own defaults.
type LookupScan struct {
	// LookupWindow is how far back a scan looks when the worker does not
	// say when the journal first saw the key.
	LookupWindow time.Duration `mapstructure:"lookup_window"`
	// LookupSkew: when the worker says when the journal first saw the key
	// (Attempt.Since), the scan starts that long before it instead (the
	// journal's clock and the target's may differ; nothing for the key can
	// have been sent earlier).
	LookupSkew time.Duration `mapstructure:"lookup_skew"`
	// LookupMaxPages caps the pages one Lookup reads; past them without a
	// match the answer cannot be "not found".
	LookupMaxPages int `mapstructure:"lookup_max_pages"`
}

// WithDefaults returns s with its zero fields taken from def.
func (s LookupScan) WithDefaults(def LookupScan) LookupScan {
	s.LookupWindow = cmp.Or(s.LookupWindow, def.LookupWindow)
	s.LookupSkew = cmp.Or(s.LookupSkew, def.LookupSkew)
	s.LookupMaxPages = cmp.Or(s.LookupMaxPages, def.LookupMaxPages)
	return s
}

// Validate checks s after WithDefaults.
func (s LookupScan) Validate() error {
	if s.LookupWindow <= 0 || s.LookupMaxPages <= 0 || s.LookupSkew < 0 {
		return errors.New("lookup_window and lookup_max_pages must be positive, lookup_skew not negative")
	}
	return nil
}

// From is where a scan for the key of the call ctx carries starts: LookupSkew
// before the journal first saw the key when the worker says so
// (AttemptFrom), unless that is longer ago than LookupWindow before now.
func (s LookupScan) From(ctx context.Context, now time.Time) time.Time {
	from := now.Add(-s.LookupWindow)
	if att, ok := AttemptFrom(ctx); ok && !att.Since.IsZero() {
		if since := att.Since.Add(-s.LookupSkew); since.After(from) {
			from = since
		}
	}
	return from
}

// SettleTime is the settle-time rule of a target that documents no bound on
// a late create: the configured d, def when d is 0, and 0 when d is
// negative (the operator's explicit "trust a not-found at once").
func SettleTime(d, def time.Duration) time.Duration {
	return max(cmp.Or(d, def), 0)
}
