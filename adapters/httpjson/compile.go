package httpjson

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// A Config is checked in two passes: validate checks the declaration's
// settings one section at a time, then compile parses the templates and
// checks what they reference (payload fields of the served types, the key
// alone in a lookup).

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

// compile validates c, then parses its templates.
func (c Config) compile() (*compiled, error) {
	for _, check := range []func() error{c.validateTarget, c.validateAuth, c.validateKey,
		c.validateExecute, c.validateErrors, c.validateLookups, c.validateCapabilities} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	cp := &compiled{headers: map[string]text{}}
	if err := c.compileExecute(cp); err != nil {
		return nil, err
	}
	if err := c.compileLookups(cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// ---- validation: the declaration's settings ----

func (c Config) validateTarget() error {
	if err := c.HTTPConfig.Validate("base_url", c.BaseURL); err != nil {
		return c.fail("%v", err)
	}
	if !operation.ValidName(c.TargetSystem) {
		return c.fail("target_system must be 1-32 of [a-z0-9_-]")
	}
	return nil
}

func (c Config) validateAuth() error {
	switch c.Auth.Scheme {
	case "none":
	case "bearer", "basic", "header":
		if c.Auth.SecretEnv == "" && c.Auth.SecretFile == "" {
			return c.fail("auth.%s needs secret_env or secret_file (credentials are never written in the config)", c.Auth.Scheme)
		}
		if c.Auth.Scheme == "basic" && (c.Auth.User == "" || !adapters.BasicUserOK(c.Auth.User)) {
			return c.fail("auth.user is required for basic and must not hold ':' or line breaks")
		}
		if c.Auth.Scheme == "header" && !operation.ValidToken(c.Auth.Header, 128) {
			return c.fail("auth.header must be a header name")
		}
	default:
		return c.fail("auth.scheme %q: bearer, basic, header or none", c.Auth.Scheme)
	}
	return nil
}

func (c Config) validateKey() error {
	switch c.Key.In {
	case KeyInHeader:
		if !operation.ValidToken(c.Key.Name, 128) {
			return c.fail("key.name must be a header name, e.g. Idempotency-Key")
		}
	case KeyInBody, KeyInQuery:
		if c.Key.Name == "" || strings.ContainsAny(c.Key.Name, " ?&=#") {
			return c.fail("key.name must be a body member path or a query parameter name")
		}
	case "":
		return c.unsafe("key.in is missing: say where the operation key goes (header, body or query), or the target cannot recognise a repeat and no lookup can find it")
	default:
		return c.fail("key.in %q: header, body or query", c.Key.In)
	}
	if c.Key.MaxLen < 16 {
		return c.fail("key.max_len must be at least 16")
	}
	return nil
}

func (c Config) validateExecute() error {
	switch c.Execute.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return c.fail("execute.method %q: POST, PUT or PATCH", c.Execute.Method)
	}
	if c.Execute.ObjectID == "" || !validPath(c.Execute.ObjectID) {
		return c.fail("execute.object_id must be the JSON path of the created object's id")
	}
	for _, p := range []string{c.Execute.Status, c.Execute.KeyEcho} {
		if p != "" && !validPath(p) {
			return c.fail("execute.status and execute.key_echo must be JSON paths")
		}
	}
	for _, s := range c.Execute.SuccessStatus {
		if s < 200 || s > 299 {
			return c.fail("execute.success_status %d: a success is a 2xx", s)
		}
	}
	if !strings.HasPrefix(c.Execute.URL, "/") {
		return c.fail("execute.url must start with / (it is relative to base_url)")
	}
	for name := range c.Execute.Headers {
		if !operation.ValidToken(name, 128) {
			return c.fail("execute.headers: %q is not a header name", name)
		}
	}
	for i, v := range c.Execute.Verify {
		if v.Path == "" || !validPath(v.Path) {
			return c.fail("execute.verify[%d].path must be a JSON path", i)
		}
	}
	return nil
}

func (c Config) validateErrors() error {
	for i, r := range c.Errors {
		switch r.Class {
		case string(adapters.Retry), string(adapters.ReconcileBeforeRetry), string(adapters.NeverRetry), ClassLookup:
		default:
			return c.fail("errors[%d].class %q: retry, reconcile_before_retry, never_retry or lookup", i, r.Class)
		}
		if r.BodyPath != "" && !validPath(r.BodyPath) {
			return c.fail("errors[%d].body_path must be a JSON path", i)
		}
		if r.Code != "" && adapters.SafeToken(r.Code, 64) == "" {
			return c.fail("errors[%d].code must be a short token", i)
		}
		if r.Class == string(adapters.Retry) && slices.ContainsFunc(r.Status, func(s int) bool { return s >= 200 && s < 300 }) {
			return c.fail("errors[%d]: a 2xx answer may follow a commit, it cannot be retry", i)
		}
	}
	return nil
}

func (c Config) validateLookups() error {
	if len(c.Lookup) == 0 {
		return c.unsafe("lookup is missing: an answer lost after the request was sent could never be settled (declare a get or search by key)")
	}
	for i, l := range c.Lookup {
		switch l.Mode {
		case LookupGet, LookupSearch:
		default:
			return c.fail("lookup[%d].mode %q: get or search", i, l.Mode)
		}
		if l.Method != http.MethodGet && l.Method != http.MethodPost {
			return c.fail("lookup[%d].method: GET or POST", i)
		}
		if l.KeyPath == "" && l.MarkerPath == "" {
			return c.fail("lookup[%d] needs key_path or marker_path: a found object must be shown to hold the key", i)
		}
		for _, p := range []string{l.Items, l.KeyPath, l.MarkerPath, l.NotFoundPath} {
			if p != "" && !validPath(p) {
				return c.fail("lookup[%d]: %q is not a JSON path", i, p)
			}
		}
		if !strings.HasPrefix(l.URL, "/") {
			return c.fail("lookup[%d].url must be a template starting with /", i)
		}
		if l.Body != "" && l.Method != http.MethodPost {
			return c.fail("lookup[%d].body goes with method POST", i)
		}
	}
	return nil
}

func (c Config) validateCapabilities() error {
	caps := c.Capabilities
	lookupRule := slices.ContainsFunc(c.Errors, func(r ErrorRule) bool { return r.Class == ClassLookup })
	switch {
	case caps.NativeKey && caps.LookupBeforeCreate:
		return c.fail("capabilities: native_key and lookup_before_create exclude each other (a target that deduplicates needs no single-flight)")
	case !caps.NativeKey && !caps.LookupBeforeCreate:
		return c.unsafe("capabilities: declare native_key (the target deduplicates by the key) or lookup_before_create (it does not: search, then create, per key)")
	case caps.NativeKey && c.Key.In == KeyInBody && !lookupRule:
		return c.unsafe("capabilities.native_key with the key in the body needs an errors rule of class lookup that recognises the target's duplicate-key answer")
	case caps.SettleTime < 0:
		return c.fail("capabilities.settle_time must not be negative")
	}
	return nil
}

// ---- compilation: the templates and what they reference ----

// compileExecute parses the create request's url, headers, body and
// verified values into cp.
func (c Config) compileExecute(cp *compiled) error {
	var err error
	if cp.url, err = parseURL(c.Execute.URL); err != nil {
		return c.fail("execute.url: %v", err)
	}
	if err := c.checkRefs("execute.url", cp.url.refs(), false); err != nil {
		return err
	}
	for name, h := range c.Execute.Headers {
		t, err := parseText(h)
		if err != nil {
			return c.fail("execute.headers.%s: %v", name, err)
		}
		if err := c.checkRefs("execute.headers."+name, t.refs(), false); err != nil {
			return err
		}
		cp.headers[http.CanonicalHeaderKey(name)] = t
	}
	body := c.Execute.Body
	if strings.TrimSpace(body) == "" {
		body = "{}"
	}
	if cp.body, err = parseBodyText(body); err != nil {
		return c.fail("execute.body is not a JSON object template: %v", err)
	}
	if err := c.checkRefs("execute.body", cp.body.refs(), true); err != nil {
		return err
	}
	if c.Key.In == KeyInBody {
		if err := cp.body.setKey(c.Key.Name); err != nil {
			return c.fail("%v", err)
		}
	}
	for i, v := range c.Execute.Verify {
		t, err := parseText(v.Value)
		if err != nil {
			return c.fail("execute.verify[%d].value: %v", i, err)
		}
		if err := c.checkRefs(fmt.Sprintf("execute.verify[%d]", i), t.refs(), false); err != nil {
			return err
		}
		cp.verify = append(cp.verify, t)
	}
	return nil
}

// lookupRef reports whether a lookup template may name r: a lookup runs
// from the key alone.
func lookupRef(r *ref) bool {
	return r.name == "key" || r.name == "marker" || r.name == "operation_key" || r.name == "intent_id"
}

// compileLookups parses each lookup's url and body into cp.
func (c Config) compileLookups(cp *compiled) error {
	for i, l := range c.Lookup {
		u, err := parseURL(l.URL)
		if err != nil {
			return c.fail("lookup[%d].url must be a template starting with /", i)
		}
		refs := u.refs()
		for _, r := range refs {
			if !lookupRef(r) {
				return c.unsafe("lookup[%d].url names ${%s}: a lookup runs from the key alone (key, marker, operation_key, intent_id)", i, r.name)
			}
		}
		cp.lookups = append(cp.lookups, u)
		var lb *bodyTemplate
		if l.Body != "" {
			b, err := parseBodyText(l.Body)
			if err != nil {
				return c.fail("lookup[%d].body is not a JSON object template: %v", i, err)
			}
			for _, r := range b.refs() {
				if !lookupRef(r) {
					return c.unsafe("lookup[%d].body names ${%s}: a lookup runs from the key alone (key, marker, operation_key, intent_id)", i, r.name)
				}
			}
			lb = &b
			refs = append(refs, b.refs()...)
		}
		if !slices.ContainsFunc(refs, func(r *ref) bool { return r.name == "key" || r.name == "marker" || r.name == "operation_key" }) {
			return c.fail("lookup[%d] must name ${key} or ${marker} in its url or body", i)
		}
		cp.lookupBodies = append(cp.lookupBodies, lb)
	}
	return nil
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
