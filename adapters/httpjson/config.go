package httpjson

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// Where the operation key goes (KeyConfig.In).
const (
	KeyInHeader = "header"
	KeyInBody   = "body"
	KeyInQuery  = "query"
)

// Lookup modes (LookupRequest.Mode).
const (
	// LookupGet: one object by key; the not-found statuses mean "no such
	// object", anything found must echo the key (or the marker).
	LookupGet = "get"
	// LookupSearch: a list filtered by the key (or the marker); items whose
	// key_path holds the key, or whose marker_path holds the marker, match.
	LookupSearch = "search"
)

// Config declares one HTTP JSON target. Keys sit under
// adapters.http.<name> in the daemon's configuration.
type Config struct {
	// HTTPConfig: name (default: the section's name), timeout (default
	// 30s), rate_limit (default none).
	adapters.HTTPConfig `mapstructure:",squash"`
	// TargetSystem is the class of target the declared operation types
	// name (operations.<type>.target_system), e.g. "warehouse".
	TargetSystem string `mapstructure:"target_system"`
	// BaseURL is the target's root; execute and lookup URLs are relative
	// to it.
	BaseURL string `mapstructure:"base_url"`
	// Auth says how the credential travels. It is read from a file or an
	// environment variable, never from this file.
	Auth AuthConfig `mapstructure:"auth"`
	// Key says where the operation key goes.
	Key KeyConfig `mapstructure:"key"`
	// Execute is the create request and how its answer is read.
	Execute ExecuteConfig `mapstructure:"execute"`
	// Errors map answers to error classes before the defaults apply.
	Errors []ErrorRule `mapstructure:"errors"`
	// Lookup are the requests that find an earlier attempt by key, tried
	// in order; what they find together is the answer.
	Lookup []LookupRequest `mapstructure:"lookup"`
	// Capabilities declares what the target guarantees.
	Capabilities CapabilitiesConfig `mapstructure:"capabilities"`

	// Types are the operation types routed to this adapter (injected from
	// the registry): templates may name only their fields.
	Types []operation.Type `mapstructure:"-"`
}

// AuthConfig is the credential: Scheme bearer (Authorization: Bearer),
// basic (User and the secret as password), header (the secret in Header)
// or none. The secret comes from SecretFile (first line) or SecretEnv.
type AuthConfig struct {
	Scheme     string `mapstructure:"scheme"`
	User       string `mapstructure:"user"`
	Header     string `mapstructure:"header"`
	SecretEnv  string `mapstructure:"secret_env"`
	SecretFile string `mapstructure:"secret_file"`
}

// KeyConfig places the operation key.
type KeyConfig struct {
	// In is header, body or query.
	In string `mapstructure:"in"`
	// Name is the header (Idempotency-Key), the body member path
	// (externalCode, meta.external_id) or the query parameter.
	Name string `mapstructure:"name"`
	// MaxLen is the longest key the target stores (default 64); longer
	// operation keys are sent as a stable digest form.
	MaxLen int `mapstructure:"max_len"`
}

// ExecuteConfig is the create request.
type ExecuteConfig struct {
	// Method is POST (default), PUT or PATCH.
	Method string `mapstructure:"method"`
	// URL is a template relative to base_url: /api/shipments.
	URL string `mapstructure:"url"`
	// Headers are text templates (no free-text fields).
	Headers map[string]string `mapstructure:"headers"`
	// Body is a JSON text template: {"order": "${payload.order_id}"}.
	Body string `mapstructure:"body"`
	// SuccessStatus are the statuses of a created (or replayed) object
	// (default 200 and 201).
	SuccessStatus []int `mapstructure:"success_status"`
	// ObjectID is the JSON path (gjson syntax) of the object's id in the
	// answer (and in a lookup's object). Required.
	ObjectID string `mapstructure:"object_id"`
	// Status is the path of the business status; StatusDefault is used
	// when Status is empty or the answer has none (default "created").
	Status        string `mapstructure:"status"`
	StatusDefault string `mapstructure:"status_default"`
	// KeyEcho is the path where the answer repeats the key the target
	// stored; when it differs the key was dropped on the way, which is
	// logged and reported (key_stored false).
	KeyEcho string `mapstructure:"key_echo"`
	// Verify compares a found object with the payload: an object found
	// for the key whose path does not hold the rendered value is a
	// payload mismatch (never_retry).
	Verify []VerifyRule `mapstructure:"verify"`
}

// VerifyRule is one comparison of a found object with the payload.
type VerifyRule struct {
	Path  string `mapstructure:"path"`
	Value string `mapstructure:"value"`
}

// ErrorRule classifies an answer. A rule matches when the status is one
// of Status (any when empty) and, when set, the body at BodyPath equals
// Equals, or the body contains Contains.
type ErrorRule struct {
	Status   []int  `mapstructure:"status"`
	BodyPath string `mapstructure:"body_path"`
	Equals   string `mapstructure:"equals"`
	Contains string `mapstructure:"contains"`
	// Class is retry, reconcile_before_retry, never_retry, or lookup (the
	// key already exists: look the object up and return it, as a replay).
	Class string `mapstructure:"class"`
	// Code is the safe error code (default by class and status).
	Code string `mapstructure:"code"`
}

// ClassLookup is the ErrorRule class "the key already exists".
const ClassLookup = "lookup"

// LookupRequest is one request of a lookup by key. Its templates may name
// only key, marker, operation_key and intent_id: the reconciler may hold
// the key alone.
type LookupRequest struct {
	Mode   string `mapstructure:"mode"`
	Method string `mapstructure:"method"`
	URL    string `mapstructure:"url"`
	// Body is a JSON template sent with a POST search ({"filter":
	// {"external_id": "${key}"}}); GET lookups send none.
	Body string `mapstructure:"body"`
	// NotFoundStatus (get) are the statuses that mean "none" (default
	// 404); NotFoundPath/NotFoundEquals, when set, must also match the
	// body, so that a proxy's 404 is not taken for a verdict.
	NotFoundStatus []int  `mapstructure:"not_found_status"`
	NotFoundPath   string `mapstructure:"not_found_path"`
	NotFoundEquals string `mapstructure:"not_found_equals"`
	// Items (search) is the path of the result array ("" = the answer).
	Items string `mapstructure:"items"`
	// KeyPath is the path in an object holding the key; MarkerPath the
	// path of a text holding the marker. At least one is required.
	KeyPath    string `mapstructure:"key_path"`
	MarkerPath string `mapstructure:"marker_path"`
}

// CapabilitiesConfig declares what the target guarantees.
type CapabilitiesConfig struct {
	// NativeKey: the target deduplicates by the key (an idempotency
	// header, or a unique external id whose duplicate an error rule of
	// class lookup recognises).
	NativeKey bool `mapstructure:"native_key"`
	// LookupBeforeCreate: the target does not deduplicate, so creation is
	// serialised per key in this process and preceded by a lookup, and
	// followed by one that reports duplicates.
	LookupBeforeCreate bool `mapstructure:"lookup_before_create"`
	// SettleTime is the search lag: a "not found" counts only this long
	// after the attempt.
	SettleTime time.Duration `mapstructure:"settle_time"`
}

// Defaults.
const (
	DefaultTimeout = 30 * time.Second
	DefaultMaxLen  = 64
)

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("httpjson: invalid config")

// ErrUnsafeConfig is wrapped by a declaration that would break a
// guarantee (no way to find an attempt by key, a free-text field outside
// the body).
var ErrUnsafeConfig = errors.New("httpjson: unsafe config")

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults(adapters.HTTPConfig{Name: "http", Timeout: DefaultTimeout})
	c.BaseURL = adapters.TrimBaseURL(c.BaseURL, "")
	c.Auth.Scheme = cmp.Or(c.Auth.Scheme, "none")
	c.Key.MaxLen = cmp.Or(c.Key.MaxLen, DefaultMaxLen)
	c.Execute.Method = strings.ToUpper(cmp.Or(c.Execute.Method, http.MethodPost))
	if len(c.Execute.SuccessStatus) == 0 {
		c.Execute.SuccessStatus = []int{http.StatusOK, http.StatusCreated}
	}
	c.Execute.StatusDefault = cmp.Or(c.Execute.StatusDefault, "created")
	c.Lookup = slices.Clone(c.Lookup) // the caller's declaration stays as it was
	for i := range c.Lookup {
		l := &c.Lookup[i]
		l.Method = strings.ToUpper(cmp.Or(l.Method, http.MethodGet))
		if l.Mode == LookupGet && len(l.NotFoundStatus) == 0 {
			l.NotFoundStatus = []int{http.StatusNotFound}
		}
	}
	return c
}

// validPath accepts a gjson path: 1-256 printable bytes.
func validPath(p string) bool {
	if p == "" || len(p) > 256 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return false
		}
	}
	return true
}
