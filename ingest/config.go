package ingest

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/wire"
)

// Schemes: how a source's notifications are authenticated.
const (
	// SchemeStripe verifies the Stripe-Signature header.
	SchemeStripe = "stripe"
	// SchemeStandard verifies Standard Webhooks headers (webhook-id,
	// webhook-timestamp, webhook-signature).
	SchemeStandard = "standard"
	// SchemeTBank verifies the T-Bank notification Token and TerminalKey.
	SchemeTBank = "tbank"
	// SchemeYooKassa has no signature: an address allow-list plus a re-fetch
	// of the object from YooKassa's API.
	SchemeYooKassa = "yookassa"
)

// Conversions a FieldMap can apply to the value found at its Path.
const (
	// ConvertNone copies the JSON value as it is.
	ConvertNone = ""
	// ConvertString turns a scalar into a string (a number keeps its literal
	// text, a boolean becomes "true" or "false").
	ConvertString = "string"
	// ConvertInt turns an integer number or a string of decimal digits into a
	// JSON integer.
	ConvertInt = "int"
	// ConvertMinorUnits turns a decimal amount in major units ("100.50" or
	// 100.5) into an integer in minor units (10050), with Scale decimal places.
	ConvertMinorUnits = "minor_units"
)

// Defaults.
const (
	DefaultAddr              = ":8080"
	DefaultMaxBodyBytes      = 256 << 10
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultPublishTimeout    = 5 * time.Second
	DefaultShutdownTimeout   = 25 * time.Second
	DefaultTolerance         = 5 * time.Minute
	DefaultRefetchTimeout    = 10 * time.Second
	DefaultYooKassaAPI       = "https://api.yookassa.ru/v3"
	DefaultMinorUnitsScale   = 2
)

// YooKassaAddresses are the notification source addresses YooKassa publishes
// (YooKassa's notification documentation); the default allow-list of a "yookassa" source.
var YooKassaAddresses = []string{
	"185.71.76.0/27", "185.71.77.0/27", "77.75.153.0/25", "77.75.156.11/32",
	"77.75.156.35/32", "77.75.154.128/25", "2a02:5180::/32",
}

// ErrInvalidConfig is wrapped by every configuration error from Validate and New.
var ErrInvalidConfig = errors.New("invalid ingest configuration")

// Config is the ingest server's configuration, as cmd reads it (YAML key in
// the mapstructure tags). The zero value of every field but Sources means its
// default; see WithDefaults.
type Config struct {
	// Addr is the listen address. Default ":8080".
	Addr string `mapstructure:"addr"`
	// MaxBodyBytes is the largest body accepted; larger ones get 413.
	// Default 256 KiB.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// http.Server's. Defaults 5s, 15s, 30s, 120s.
	ReadHeaderTimeout time.Duration `mapstructure:"read_header_timeout"`
	ReadTimeout       time.Duration `mapstructure:"read_timeout"`
	WriteTimeout      time.Duration `mapstructure:"write_timeout"`
	IdleTimeout       time.Duration `mapstructure:"idle_timeout"`
	// PublishTimeout bounds the wait for JetStream's PubAck; past it the
	// sender gets 503 and retries. Default 5s.
	PublishTimeout time.Duration `mapstructure:"publish_timeout"`
	// ShutdownTimeout bounds Stop's wait for in-flight requests. Default 25s.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// CommandsStream is the stream the commands must land in: the daemon's
	// nats.commands_stream, set by the binary, not a key of its own. Commands
	// go on the wire contract's subjects (wire.CommandSubject); the publish
	// names this stream as expected, so a subject captured by no stream or
	// another one fails. Default wire.CommandsStream.
	CommandsStream string `mapstructure:"-"`
	// TrustedProxies are the CIDRs (or single addresses) of reverse proxies
	// whose X-Forwarded-For is believed when checking allow-lists. Default
	// none: the peer address is the sender.
	TrustedProxies []string `mapstructure:"trusted_proxies"`
	// Sources are the webhook senders, one route POST /webhooks/{name} each.
	Sources []Source `mapstructure:"sources"`
}

// Source is one webhook sender.
type Source struct {
	// Name is the URL segment and the event id namespace: 1–32 of [a-z0-9_-].
	Name string `mapstructure:"name"`
	// Scheme is how notifications are authenticated: "stripe", "standard",
	// "tbank" or "yookassa". Default: Name when Name is one of those.
	Scheme string `mapstructure:"scheme"`
	// Secrets are the active signing secrets ("stripe": the endpoint secret
	// whsec_…, used as is; "standard": whsec_<base64>, or the bare base64;
	// "tbank": the terminal Password). Several may be active during a
	// rotation; any of them verifies. Give them here or in SecretsFile.
	Secrets []redact.Secret `mapstructure:"secrets"`
	// SecretsFile names a file holding the secrets, one a line (blank lines
	// ignored), read at New. Used when Secrets is empty.
	SecretsFile string `mapstructure:"secrets_file"`
	// TerminalKey is the T-Bank terminal the notifications must name. Required
	// for "tbank".
	TerminalKey string `mapstructure:"terminal_key"`
	// Tolerance is how far a signed timestamp may be from now, either way
	// ("stripe", "standard"). Default 5m.
	Tolerance time.Duration `mapstructure:"tolerance"`
	// AllowedAddresses, when not empty, are the only sender CIDRs (or single
	// addresses) accepted; others get 403. Default for "yookassa":
	// YooKassaAddresses; for the other schemes: any address.
	AllowedAddresses []string `mapstructure:"allowed_addresses"`
	// EventTypePath is the JSON path of the event type in the body. Default
	// "type" ("stripe", "standard"), "event" ("yookassa"), "Status" ("tbank").
	EventTypePath string `mapstructure:"event_type_path"`
	// Refetch configures the HTTP re-fetch of "yookassa" objects. Required for
	// "yookassa" unless a Refetcher is given with WithRefetcher.
	Refetch YooKassaConfig `mapstructure:"refetch"`
	// Routes map event types to operations. Events without a route are
	// acknowledged and counted, not published.
	Routes []Route `mapstructure:"routes"`
}

// YooKassaConfig configures the YooKassa re-fetch: GET {API}/payments/{id}
// (and /refunds/{id}) with HTTP Basic auth shopId:secretKey.
type YooKassaConfig struct {
	// API is the API base URL. Default "https://api.yookassa.ru/v3".
	API string `mapstructure:"api"`
	// ShopID is the shop identifier (the Basic auth user).
	ShopID string `mapstructure:"shop_id"`
	// SecretKey is the API secret key (the Basic auth password), or read from
	// SecretKeyFile at New.
	SecretKey     redact.Secret `mapstructure:"secret_key"`
	SecretKeyFile string        `mapstructure:"secret_key_file"`
	// Timeout bounds one re-fetch. Default 10s.
	Timeout time.Duration `mapstructure:"timeout"`
}

func (c YooKassaConfig) configured() bool {
	return c.ShopID != "" || !c.SecretKey.IsZero() || c.SecretKeyFile != ""
}

// Route turns one event type of a source into one operation.
type Route struct {
	// Event is the event type, matched exactly ("payment.succeeded",
	// "CONFIRMED" for T-Bank's Status).
	Event string `mapstructure:"event"`
	// Operation is the registered operation type to publish ("crm.task.create").
	Operation string `mapstructure:"operation"`
	// IntentPaths, when set, derive the command's intent_id from these body
	// paths (joined with ':' under the source's namespace) instead of the
	// event id, so that two events about the same change (Stripe may send
	// two) make one operation. Default: the intent is the event id.
	IntentPaths []string `mapstructure:"intent_paths"`
	// KeyVersion is the command's key_version. Default: none (the daemon's v1).
	KeyVersion string `mapstructure:"key_version"`
	// Payload maps body values and constants to the operation's fields.
	Payload []FieldMap `mapstructure:"payload"`
}

// FieldMap sets one payload field, from the body (Path) or a constant (Value).
type FieldMap struct {
	// Field is the payload field of the operation ("customer_id").
	Field string `mapstructure:"field"`
	// Path is a dot-separated JSON path in the body
	// ("object.metadata.customer_id"; a numeric segment indexes an array).
	Path string `mapstructure:"path"`
	// Value is a constant (string, number or boolean), used instead of Path.
	Value any `mapstructure:"value"`
	// Convert is applied to the value at Path: "" (as is), "string", "int"
	// or "minor_units".
	Convert string `mapstructure:"convert"`
	// Scale is the number of decimal places of "minor_units". Default 2.
	Scale int `mapstructure:"scale"`
	// Optional lets the field be left out when Path finds nothing (or null);
	// otherwise that is a mapping failure (422, so the sender retries).
	Optional bool `mapstructure:"optional"`
}

// WithDefaults returns c with zero fields set to their defaults. It does not
// read secret files; New does.
func (c Config) WithDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, DefaultPublishTimeout)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.CommandsStream = cmp.Or(c.CommandsStream, wire.CommandsStream)
	srcs := make([]Source, len(c.Sources))
	for i, s := range c.Sources {
		srcs[i] = s.WithDefaults()
	}
	c.Sources = srcs
	return c
}

// WithDefaults returns s with zero fields set to their defaults.
func (s Source) WithDefaults() Source {
	if s.Scheme == "" {
		switch s.Name {
		case SchemeStripe, SchemeStandard, SchemeTBank, SchemeYooKassa:
			s.Scheme = s.Name
		}
	}
	if s.Tolerance == 0 {
		s.Tolerance = DefaultTolerance
	}
	if s.EventTypePath == "" {
		switch s.Scheme {
		case SchemeStripe, SchemeStandard:
			s.EventTypePath = "type"
		case SchemeYooKassa:
			s.EventTypePath = "event"
		case SchemeTBank:
			s.EventTypePath = "Status"
		}
	}
	if len(s.AllowedAddresses) == 0 && s.Scheme == SchemeYooKassa {
		s.AllowedAddresses = append([]string(nil), YooKassaAddresses...)
	}
	if s.Scheme == SchemeYooKassa {
		if s.Refetch.API == "" {
			s.Refetch.API = DefaultYooKassaAPI
		}
		if s.Refetch.Timeout == 0 {
			s.Refetch.Timeout = DefaultRefetchTimeout
		}
	}
	routes := make([]Route, len(s.Routes))
	for i, r := range s.Routes {
		payload := make([]FieldMap, len(r.Payload))
		for j, f := range r.Payload {
			if f.Convert == ConvertMinorUnits && f.Scale == 0 {
				f.Scale = DefaultMinorUnitsScale
			}
			payload[j] = f
		}
		r.Payload = payload
		routes[i] = r
	}
	s.Routes = routes
	return s
}

// Validate checks the configuration (after WithDefaults). It checks shape
// only: that operations are registered and secrets decode is checked by New.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.MaxBodyBytes <= 0 {
		bad("max_body_bytes must be positive")
	}
	for name, d := range map[string]time.Duration{
		"read_header_timeout": c.ReadHeaderTimeout, "read_timeout": c.ReadTimeout,
		"write_timeout": c.WriteTimeout, "idle_timeout": c.IdleTimeout,
		"publish_timeout": c.PublishTimeout, "shutdown_timeout": c.ShutdownTimeout,
	} {
		if d <= 0 {
			bad("%s must be positive", name)
		}
	}
	if c.CommandsStream == "" || strings.ContainsAny(c.CommandsStream, " \t.*>") {
		bad("the commands stream %q must be a stream name (no spaces, '.', '*' or '>')", c.CommandsStream)
	}
	if _, err := parsePrefixes(c.TrustedProxies); err != nil {
		bad("trusted_proxies: %v", err)
	}
	if len(c.Sources) == 0 {
		bad("no sources configured")
	}
	seen := map[string]bool{}
	for i, s := range c.Sources {
		if seen[s.Name] {
			bad("sources[%d]: name %q used twice", i, s.Name)
		}
		seen[s.Name] = true
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("sources[%d] (%s): %w", i, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (s Source) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if !operation.ValidName(s.Name) {
		bad("name must be 1-32 of [a-z0-9_-]")
	}
	switch s.Scheme {
	case SchemeStripe, SchemeStandard, SchemeTBank:
		if len(s.Secrets) == 0 && s.SecretsFile == "" {
			bad("scheme %s needs secrets or secrets_file", s.Scheme)
		}
		for _, sec := range s.Secrets {
			if sec.IsZero() {
				bad("empty secret")
			}
		}
	case SchemeYooKassa:
		if len(s.Secrets) > 0 || s.SecretsFile != "" {
			bad("scheme yookassa has no signing secrets (it uses the address allow-list and a re-fetch)")
		}
		if s.Refetch.configured() {
			if s.Refetch.ShopID == "" {
				bad("refetch.shop_id is required")
			}
			if s.Refetch.SecretKey.IsZero() && s.Refetch.SecretKeyFile == "" {
				bad("refetch needs secret_key or secret_key_file")
			}
			if !strings.HasPrefix(s.Refetch.API, "https://") && !strings.HasPrefix(s.Refetch.API, "http://") {
				bad("refetch.api must be an http(s) URL")
			}
			if s.Refetch.Timeout <= 0 {
				bad("refetch.timeout must be positive")
			}
		}
	case "":
		bad("scheme is required (stripe, standard, tbank or yookassa)")
	default:
		bad("unknown scheme %q (want stripe, standard, tbank or yookassa)", s.Scheme)
	}
	if s.Scheme == SchemeTBank && s.TerminalKey == "" {
		bad("scheme tbank needs terminal_key")
	}
	if s.Tolerance < 0 {
		bad("tolerance must not be negative")
	}
	if _, err := parsePrefixes(s.AllowedAddresses); err != nil {
		bad("allowed_addresses: %v", err)
	}
	if err := checkPath(s.EventTypePath); err != nil {
		bad("event_type_path: %v", err)
	}
	events := map[string]bool{}
	for i, r := range s.Routes {
		if r.Event == "" {
			bad("routes[%d]: event is required", i)
		}
		if events[r.Event] {
			bad("routes[%d]: event %q routed twice (one operation per event type)", i, r.Event)
		}
		events[r.Event] = true
		if err := operation.ValidateOperationName(r.Operation); err != nil {
			bad("routes[%d]: operation: %v", i, err)
		}
		if r.KeyVersion != "" {
			if err := operation.ValidateVersion(r.KeyVersion); err != nil {
				bad("routes[%d]: key_version: %v", i, err)
			}
		}
		for j, p := range r.IntentPaths {
			if err := checkPath(p); err != nil {
				bad("routes[%d].intent_paths[%d]: %v", i, j, err)
			}
		}
		fields := map[string]bool{}
		for j, f := range r.Payload {
			if err := f.validate(); err != nil {
				bad("routes[%d].payload[%d]: %v", i, j, err)
			}
			if fields[f.Field] {
				bad("routes[%d].payload[%d]: field %q mapped twice", i, j, f.Field)
			}
			fields[f.Field] = true
		}
	}
	return errors.Join(errs...)
}

func (f FieldMap) validate() error {
	if f.Field == "" {
		return errors.New("field is required")
	}
	switch {
	case f.Path == "" && f.Value == nil:
		return errors.New("path or value is required")
	case f.Path != "" && f.Value != nil:
		return errors.New("path and value are exclusive")
	case f.Path != "":
		if err := checkPath(f.Path); err != nil {
			return fmt.Errorf("path: %w", err)
		}
	default:
		switch f.Value.(type) {
		case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		default:
			return errors.New("value must be a string, number or boolean")
		}
		if f.Convert != ConvertNone {
			return errors.New("convert applies to path values only")
		}
	}
	switch f.Convert {
	case ConvertNone, ConvertString, ConvertInt:
	case ConvertMinorUnits:
		if f.Scale < 0 || f.Scale > 9 {
			return errors.New("scale must be 0-9")
		}
	default:
		return fmt.Errorf("unknown convert %q (want string, int or minor_units)", f.Convert)
	}
	return nil
}

// parsePrefixes parses CIDRs and single addresses.
func parsePrefixes(ss []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR", s)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or CIDR", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// readSecretsFile reads one secret a line. The error never quotes the content.
func readSecretsFile(path string) ([]redact.Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: read secrets file: %w", ErrInvalidConfig, err)
	}
	var out []redact.Secret
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, redact.Secret(line))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: secrets file %s holds no secret", ErrInvalidConfig, path)
	}
	return out, nil
}
