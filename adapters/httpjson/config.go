package httpjson

import (
	"cmp"
	"errors"
	"fmt"
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

// compiled is a validated Config's parsed templates.
type compiled struct {
	url     urlTemplate
	headers map[string]text
	body    bodyTemplate
	verify  []text
	lookups []urlTemplate
	// lookupBodies are the POST lookups' bodies (nil: none).
	lookupBodies []*bodyTemplate
}

func (c Config) fail(format string, args ...any) error {
	return fmt.Errorf("%w: adapters.http.%s: %s", ErrInvalidConfig, c.Name, fmt.Sprintf(format, args...))
}

func (c Config) unsafe(format string, args ...any) error {
	return fmt.Errorf("%w: adapters.http.%s: %s", ErrUnsafeConfig, c.Name, fmt.Sprintf(format, args...))
}

// Validate checks c (after WithDefaults) and parses its templates.
func (c Config) Validate() error {
	_, err := c.compile()
	return err
}

func (c Config) compile() (*compiled, error) {
	if err := c.HTTPConfig.Validate("base_url", c.BaseURL); err != nil {
		return nil, c.fail("%v", err)
	}
	if !operation.ValidName(c.TargetSystem) {
		return nil, c.fail("target_system must be 1-32 of [a-z0-9_-]")
	}
	switch c.Auth.Scheme {
	case "none":
	case "bearer", "basic", "header":
		if c.Auth.SecretEnv == "" && c.Auth.SecretFile == "" {
			return nil, c.fail("auth.%s needs secret_env or secret_file (credentials are never written in the config)", c.Auth.Scheme)
		}
		if c.Auth.Scheme == "basic" && (c.Auth.User == "" || !adapters.BasicUserOK(c.Auth.User)) {
			return nil, c.fail("auth.user is required for basic and must not hold ':' or line breaks")
		}
		if c.Auth.Scheme == "header" && !operation.ValidToken(c.Auth.Header, 128) {
			return nil, c.fail("auth.header must be a header name")
		}
	default:
		return nil, c.fail("auth.scheme %q: bearer, basic, header or none", c.Auth.Scheme)
	}
	switch c.Key.In {
	case KeyInHeader:
		if !operation.ValidToken(c.Key.Name, 128) {
			return nil, c.fail("key.name must be a header name, e.g. Idempotency-Key")
		}
	case KeyInBody, KeyInQuery:
		if c.Key.Name == "" || strings.ContainsAny(c.Key.Name, " ?&=#") {
			return nil, c.fail("key.name must be a body member path or a query parameter name")
		}
	case "":
		return nil, c.unsafe("key.in is missing: say where the operation key goes (header, body or query), or the target cannot recognise a repeat and no lookup can find it")
	default:
		return nil, c.fail("key.in %q: header, body or query", c.Key.In)
	}
	if c.Key.MaxLen < 16 {
		return nil, c.fail("key.max_len must be at least 16")
	}
	switch c.Execute.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil, c.fail("execute.method %q: POST, PUT or PATCH", c.Execute.Method)
	}
	if c.Execute.ObjectID == "" || !validPath(c.Execute.ObjectID) {
		return nil, c.fail("execute.object_id must be the JSON path of the created object's id")
	}
	for _, p := range []string{c.Execute.Status, c.Execute.KeyEcho} {
		if p != "" && !validPath(p) {
			return nil, c.fail("execute.status and execute.key_echo must be JSON paths")
		}
	}
	for _, s := range c.Execute.SuccessStatus {
		if s < 200 || s > 299 {
			return nil, c.fail("execute.success_status %d: a success is a 2xx", s)
		}
	}
	cp := &compiled{headers: map[string]text{}}
	var err error
	if cp.url, err = parseURL(c.Execute.URL); err != nil {
		return nil, c.fail("execute.url: %v", err)
	}
	if !strings.HasPrefix(c.Execute.URL, "/") {
		return nil, c.fail("execute.url must start with / (it is relative to base_url)")
	}
	if err := c.checkRefs("execute.url", cp.url.refs(), false); err != nil {
		return nil, err
	}
	for name, h := range c.Execute.Headers {
		if !operation.ValidToken(name, 128) {
			return nil, c.fail("execute.headers: %q is not a header name", name)
		}
		t, err := parseText(h)
		if err != nil {
			return nil, c.fail("execute.headers.%s: %v", name, err)
		}
		if err := c.checkRefs("execute.headers."+name, t.refs(), false); err != nil {
			return nil, err
		}
		cp.headers[http.CanonicalHeaderKey(name)] = t
	}
	body := c.Execute.Body
	if strings.TrimSpace(body) == "" {
		body = "{}"
	}
	if cp.body, err = parseBodyText(body); err != nil {
		return nil, c.fail("execute.body is not a JSON object template: %v", err)
	}
	if err := c.checkRefs("execute.body", cp.body.refs(), true); err != nil {
		return nil, err
	}
	if c.Key.In == KeyInBody {
		if err := cp.body.setKey(c.Key.Name); err != nil {
			return nil, c.fail("%v", err)
		}
	}
	for i, v := range c.Execute.Verify {
		if v.Path == "" || !validPath(v.Path) {
			return nil, c.fail("execute.verify[%d].path must be a JSON path", i)
		}
		t, err := parseText(v.Value)
		if err != nil {
			return nil, c.fail("execute.verify[%d].value: %v", i, err)
		}
		if err := c.checkRefs(fmt.Sprintf("execute.verify[%d]", i), t.refs(), false); err != nil {
			return nil, err
		}
		cp.verify = append(cp.verify, t)
	}
	lookupRule := false
	for i, r := range c.Errors {
		switch r.Class {
		case string(adapters.Retry), string(adapters.ReconcileBeforeRetry), string(adapters.NeverRetry):
		case ClassLookup:
			lookupRule = true
		default:
			return nil, c.fail("errors[%d].class %q: retry, reconcile_before_retry, never_retry or lookup", i, r.Class)
		}
		if r.BodyPath != "" && !validPath(r.BodyPath) {
			return nil, c.fail("errors[%d].body_path must be a JSON path", i)
		}
		if r.Code != "" && adapters.SafeToken(r.Code, 64) == "" {
			return nil, c.fail("errors[%d].code must be a short token", i)
		}
		if r.Class == string(adapters.Retry) && slices.ContainsFunc(r.Status, func(s int) bool { return s >= 200 && s < 300 }) {
			return nil, c.fail("errors[%d]: a 2xx answer may follow a commit, it cannot be retry", i)
		}
	}
	if len(c.Lookup) == 0 {
		return nil, c.unsafe("lookup is missing: an answer lost after the request was sent could never be settled (declare a get or search by key)")
	}
	for i, l := range c.Lookup {
		switch l.Mode {
		case LookupGet, LookupSearch:
		default:
			return nil, c.fail("lookup[%d].mode %q: get or search", i, l.Mode)
		}
		if l.Method != http.MethodGet && l.Method != http.MethodPost {
			return nil, c.fail("lookup[%d].method: GET or POST", i)
		}
		if l.KeyPath == "" && l.MarkerPath == "" {
			return nil, c.fail("lookup[%d] needs key_path or marker_path: a found object must be shown to hold the key", i)
		}
		for _, p := range []string{l.Items, l.KeyPath, l.MarkerPath, l.NotFoundPath} {
			if p != "" && !validPath(p) {
				return nil, c.fail("lookup[%d]: %q is not a JSON path", i, p)
			}
		}
		u, err := parseURL(l.URL)
		if err != nil || !strings.HasPrefix(l.URL, "/") {
			return nil, c.fail("lookup[%d].url must be a template starting with /", i)
		}
		refs := u.refs()
		for _, r := range refs {
			if r.name != "key" && r.name != "marker" && r.name != "operation_key" && r.name != "intent_id" {
				return nil, c.unsafe("lookup[%d].url names ${%s}: a lookup runs from the key alone (key, marker, operation_key, intent_id)", i, r.name)
			}
		}
		cp.lookups = append(cp.lookups, u)
		var lb *bodyTemplate
		if l.Body != "" {
			if l.Method != http.MethodPost {
				return nil, c.fail("lookup[%d].body goes with method POST", i)
			}
			b, err := parseBodyText(l.Body)
			if err != nil {
				return nil, c.fail("lookup[%d].body is not a JSON object template: %v", i, err)
			}
			for _, r := range b.refs() {
				if r.name != "key" && r.name != "marker" && r.name != "operation_key" && r.name != "intent_id" {
					return nil, c.unsafe("lookup[%d].body names ${%s}: a lookup runs from the key alone (key, marker, operation_key, intent_id)", i, r.name)
				}
			}
			lb = &b
			refs = append(refs, b.refs()...)
		}
		if !slices.ContainsFunc(refs, func(r *ref) bool { return r.name == "key" || r.name == "marker" || r.name == "operation_key" }) {
			return nil, c.fail("lookup[%d] must name ${key} or ${marker} in its url or body", i)
		}
		cp.lookupBodies = append(cp.lookupBodies, lb)
	}
	caps := c.Capabilities
	switch {
	case caps.NativeKey && caps.LookupBeforeCreate:
		return nil, c.fail("capabilities: native_key and lookup_before_create exclude each other (a target that deduplicates needs no single-flight)")
	case !caps.NativeKey && !caps.LookupBeforeCreate:
		return nil, c.unsafe("capabilities: declare native_key (the target deduplicates by the key) or lookup_before_create (it does not: search, then create, per key)")
	case caps.NativeKey && c.Key.In == KeyInBody && !lookupRule:
		return nil, c.unsafe("capabilities.native_key with the key in the body needs an errors rule of class lookup that recognises the target's duplicate-key answer")
	case caps.SettleTime < 0:
		return nil, c.fail("capabilities.settle_time must not be negative")
	}
	return cp, nil
}

// checkRefs checks that payload references name fields of every served
// type, and that free text appears only in the body.
func (c Config) checkRefs(where string, refs []*ref, inBody bool) error {
	for _, r := range refs {
		if r.name != "payload" {
			continue
		}
		for _, t := range c.Types {
			f, ok := t.Field(r.path[0])
			if !ok {
				return c.fail("%s: ${payload.%s}: %s has no field %s", where, strings.Join(r.path, "."), t.Name, r.path[0])
			}
			if f.FreeText && !inBody {
				return c.unsafe("%s: ${payload.%s} is free text: it may go in the body only, never in a URL, header or comparison that logs and proxies keep", where, r.path[0])
			}
			for _, p := range r.path[1:] {
				if f.Kind != operation.KindObject {
					return c.fail("%s: ${payload.%s}: %s is not an object", where, strings.Join(r.path, "."), f.Name)
				}
				sub, ok := operation.Type{Fields: f.Fields}.Field(p)
				if !ok {
					return c.fail("%s: ${payload.%s}: no member %s", where, strings.Join(r.path, "."), p)
				}
				f = sub
			}
			if r.decimal && f.Kind != operation.KindMoney && f.Kind != operation.KindInt {
				return c.fail("%s: ${payload.%s|decimal}: |decimal formats money", where, strings.Join(r.path, "."))
			}
		}
	}
	return nil
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
