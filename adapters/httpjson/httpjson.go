package httpjson

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// Adapter performs declared operations on one declared target. It is safe
// for concurrent use.
type Adapter struct {
	cfg    Config
	cp     *compiled
	client *adapters.Client
	types  map[string]bool
	locks  adapters.KeyLocks

	// recent remembers, for the settle time, the objects this process
	// created under lookup_before_create: a search that lags cannot show
	// them yet, the memory can (one process only; across replicas the
	// journal's lease keeps a second Execute from starting).
	recentMu sync.Mutex
	recent   map[string]recentObject
}

type recentObject struct {
	obj object
	at  time.Time
}

// remember records obj as created for key now.
func (a *Adapter) remember(key string, obj object) {
	d := a.cfg.Capabilities.SettleTime
	if d <= 0 {
		return
	}
	now := a.cfg.Clock()
	a.recentMu.Lock()
	defer a.recentMu.Unlock()
	if a.recent == nil {
		a.recent = map[string]recentObject{}
	}
	if len(a.recent) >= 4096 {
		for k, r := range a.recent {
			if now.Sub(r.at) >= d {
				delete(a.recent, k)
			}
		}
	}
	a.recent[key] = recentObject{obj: obj, at: now}
}

// recalled returns the object this process created for key within the
// settle time.
func (a *Adapter) recalled(key string) (object, bool) {
	a.recentMu.Lock()
	defer a.recentMu.Unlock()
	r, ok := a.recent[key]
	if !ok || a.cfg.Clock().Sub(r.at) >= a.cfg.Capabilities.SettleTime {
		return object{}, false
	}
	return r.obj, true
}

var _ adapters.Adapter = (*Adapter)(nil)

// New validates cfg (after WithDefaults), resolves the credential and
// returns the adapter.
func New(cfg Config) (*Adapter, error) {
	cfg = cfg.WithDefaults()
	cp, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	var authorize func(*http.Request)
	if cfg.Auth.Scheme != "none" {
		secret, err := adapters.Credential{File: cfg.Auth.SecretFile, Env: cfg.Auth.SecretEnv}.Load(cfg.Getenv)
		if err != nil {
			return nil, fmt.Errorf("httpjson: adapters.http.%s: credential: %w", cfg.Name, err)
		}
		switch cfg.Auth.Scheme {
		case "bearer":
			authorize = adapters.BearerAuth(secret)
		case "basic":
			authorize = adapters.BasicAuth(cfg.Auth.User, secret)
		case "header":
			h := cfg.Auth.Header
			authorize = func(r *http.Request) { r.Header.Set(h, secret.Reveal()) }
		}
	}
	a := &Adapter{cfg: cfg, cp: cp, client: cfg.NewClient(authorize), types: map[string]bool{}}
	for _, t := range cfg.Types {
		a.types[t.Name] = true
	}
	return a, nil
}

// Name returns the instance name.
func (a *Adapter) Name() string { return a.cfg.Name }

// TargetSystem returns the declared class of target.
func (a *Adapter) TargetSystem() string { return a.cfg.TargetSystem }

// Admit reserves a call's first requests in the client-side bucket (nil
// without a limit): the search before the create of a target declared
// lookup_before_create, and the create. The worker waits for them before it
// takes an attempt.
func (a *Adapter) Admit(operation.Operation) *adapters.Admission {
	if a.cfg.Capabilities.LookupBeforeCreate {
		return a.client.Admit(2)
	}
	return a.client.Admit(1)
}

// Capabilities returns the declared profile; every declared target can be
// looked up by key (a declaration without lookup is refused).
func (a *Adapter) Capabilities() adapters.Capabilities {
	c := a.cfg.Capabilities
	return adapters.Capabilities{
		NativeKey: c.NativeKey, Lookup: true, SingleFlight: c.LookupBeforeCreate,
		SettleTime: c.SettleTime, MaxKeyLen: a.cfg.Key.MaxLen,
	}
}

func (a *Adapter) call(op operation.Operation) *call {
	return &call{op: op, key: adapters.TargetKey(op.Key.String(), a.cfg.Key.MaxLen)}
}

// Execute creates the object once: with the key where the declaration
// puts it; for a target without deduplication under a per-key lock, after
// a lookup when the call may follow an earlier attempt.
func (a *Adapter) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	if len(a.types) > 0 && !a.types[op.Type] {
		return adapters.Outcome{}, adapters.Invalid(fmt.Errorf("httpjson %s: operation %q is not routed to this target", a.cfg.Name, op.Type))
	}
	c := a.call(op)
	if !a.cfg.Capabilities.LookupBeforeCreate {
		out, _, err := a.create(ctx, c)
		var dup *duplicateKey
		if errors.As(err, &dup) {
			return a.replay(ctx, c)
		}
		return out, err
	}
	unlock, err := a.locks.Lock(ctx, c.key)
	if err != nil {
		return adapters.Outcome{}, adapters.NewError(adapters.CodeRequestNotSent, adapters.Retry, fmt.Errorf("httpjson %s: wait for single-flight: %w", a.cfg.Name, err))
	}
	defer unlock()
	if o, ok := a.recalled(c.key); ok {
		return a.keep(c, []object{o}, true)
	}
	if adapters.Retried(ctx) {
		found, err := a.find(ctx, c)
		if err != nil {
			return adapters.Outcome{}, adapters.NotSent(err)
		}
		if len(found) > 0 {
			return a.keep(c, found, true)
		}
	}
	out, created, err := a.create(ctx, c)
	if err != nil {
		var dup *duplicateKey
		if errors.As(err, &dup) {
			return a.replay(ctx, c)
		}
		return out, err
	}
	a.remember(c.key, created)
	// Re-search: more than one object for the key means a race outside
	// this process or a connector that dropped the key.
	if again, err := a.find(ctx, c); err == nil && len(again) > 1 {
		if o, err := a.keep(c, again, again[0].id != out.ObjectID); err == nil {
			return o, nil
		}
	}
	return out, nil
}

// replay answers an Execute the target refused as a duplicate key: the
// object the key already made, if it holds this payload.
func (a *Adapter) replay(ctx context.Context, c *call) (adapters.Outcome, error) {
	found, err := a.find(ctx, c)
	if err != nil {
		return adapters.Outcome{}, err
	}
	if len(found) == 0 {
		return adapters.Outcome{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "httpjson %s: the target reported the key as taken, but the lookup does not find it yet", a.cfg.Name)
	}
	return a.keep(c, found, true)
}

// keep is the outcome of the objects found for the key (oldest first):
// the oldest, checked against the payload, the others duplicates.
func (a *Adapter) keep(c *call, found []object, replayed bool) (adapters.Outcome, error) {
	if c.op.Fields != nil {
		for i, v := range a.cfg.Execute.Verify {
			want := a.cp.verify[i].render(c, nil)
			if got := gjson.GetBytes(found[0].raw, v.Path); got.String() != want {
				return adapters.Outcome{}, adapters.NewError(adapters.CodeKeyPayloadMismatch, adapters.NeverRetry,
					fmt.Errorf("httpjson %s: the object holding this key differs at %s", a.cfg.Name, v.Path))
			}
		}
	}
	out := a.outcome(found[0], replayed)
	ids := make([]string, 0, len(found)-1)
	for _, o := range found[1:] {
		ids = append(ids, o.id)
	}
	out.ReportDuplicates(ids)
	return out, nil
}

// duplicateKey is an answer an error rule of class lookup matched.
type duplicateKey struct{ status int }

func (d *duplicateKey) Error() string {
	return fmt.Sprintf("HTTP %d: the key is already taken", d.status)
}

func (a *Adapter) create(ctx context.Context, c *call) (adapters.Outcome, object, error) {
	bodyVal := json.RawMessage(a.cp.body.render(make([]byte, 0, 512), c))
	u := a.cfg.BaseURL + a.cp.url.render(c)
	if a.cfg.Key.In == KeyInQuery {
		u = addQuery(u, a.cfg.Key.Name, c.key)
	}
	header := make(http.Header, len(a.cp.headers)+1)
	for name, t := range a.cp.headers {
		v := t.render(c, nil)
		if strings.ContainsAny(v, "\r\n\x00") {
			return adapters.Outcome{}, object{}, adapters.Invalid(fmt.Errorf("httpjson %s: header %s would hold a line break", a.cfg.Name, name))
		}
		header.Set(name, v)
	}
	if a.cfg.Key.In == KeyInHeader {
		header.Set(a.cfg.Key.Name, c.key)
	}
	resp, err := a.client.JSON(ctx, a.cfg.Execute.Method, u, bodyVal, header)
	if err != nil {
		return adapters.Outcome{}, object{}, err
	}
	if slices.Contains(a.cfg.Execute.SuccessStatus, resp.StatusCode) {
		o, err := a.parseObject(resp.Body, adapters.ReconcileBeforeRetry)
		if err != nil {
			return adapters.Outcome{}, object{}, err
		}
		out := a.outcome(o, false)
		if p := a.cfg.Execute.KeyEcho; p != "" && gjson.GetBytes(resp.Body, p).String() != c.key {
			out.Details["key_stored"] = false
			a.cfg.Logger.Error("the target stored the object without our key: a replay is not recognised by it",
				"operation_key", c.op.Key.String(), "target_system", a.cfg.TargetSystem, "target_object_id", o.id)
		}
		return out, o, nil
	}
	return adapters.Outcome{}, object{}, a.classify(resp)
}

func addQuery(u, name, value string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + url.QueryEscape(name) + "=" + url.QueryEscape(value)
}

// classify maps a non-success answer: the declared rules first, then the
// defaults every adapter shares (adapters.StatusError). A 2xx that is not
// a declared success may follow a commit: reconcile.
func (a *Adapter) classify(resp *adapters.HTTPResponse) error {
	now := a.cfg.Clock()
	for _, r := range a.cfg.Errors {
		if len(r.Status) > 0 && !slices.Contains(r.Status, resp.StatusCode) {
			continue
		}
		if r.BodyPath != "" && (!gjson.ValidBytes(resp.Body) || gjson.GetBytes(resp.Body, r.BodyPath).String() != r.Equals) {
			continue
		}
		if r.Contains != "" && !strings.Contains(string(resp.Body), r.Contains) {
			continue
		}
		if r.Class == ClassLookup {
			return &duplicateKey{status: resp.StatusCode}
		}
		def := adapters.StatusError(resp, now)
		code := r.Code
		if code == "" {
			code = adapters.CodeUnexpectedResponse
			if def != nil {
				code = def.Code
			}
		}
		e := adapters.NewError(code, adapters.Class(r.Class), fmt.Errorf("httpjson %s: HTTP %d (declared rule)", a.cfg.Name, resp.StatusCode))
		if d, ok := adapters.ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok && e.Class == adapters.Retry {
			e.RetryAfter = d
		}
		return e
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return adapters.Unexpected(adapters.ReconcileBeforeRetry, "httpjson %s: HTTP %d is not a declared success", a.cfg.Name, resp.StatusCode)
	}
	return adapters.StatusError(resp, now)
}

// object is one object of the target as an answer gives it.
type object struct {
	id, status string
	raw        []byte
}

func (a *Adapter) parseObject(raw []byte, class adapters.Class) (object, error) {
	if !gjson.ValidBytes(raw) {
		return object{}, adapters.Unexpected(class, "httpjson %s: the answer is not JSON (%d bytes)", a.cfg.Name, len(raw))
	}
	return a.objectOf(gjson.ParseBytes(raw), class)
}

func (a *Adapter) objectOf(v gjson.Result, class adapters.Class) (object, error) {
	idv := v.Get(a.cfg.Execute.ObjectID)
	id := ""
	if idv.Type == gjson.String || idv.Type == gjson.Number {
		id = adapters.SafeToken(idv.String(), 128)
	}
	if id == "" || !v.IsObject() {
		return object{}, adapters.Unexpected(class, "httpjson %s: the answer holds no object id at %s", a.cfg.Name, a.cfg.Execute.ObjectID)
	}
	status := ""
	if p := a.cfg.Execute.Status; p != "" {
		status = adapters.SafeToken(v.Get(p).String(), 64)
	}
	return object{id: id, status: status, raw: []byte(v.Raw)}, nil
}

func (a *Adapter) outcome(o object, replayed bool) adapters.Outcome {
	status := o.status
	if status == "" {
		status = a.cfg.Execute.StatusDefault
	}
	return adapters.Outcome{ObjectID: o.id, BusinessStatus: status, Details: map[string]any{operation.DetailTargetReplayed: replayed}}
}

// Lookup finds the objects the lookup requests return for the key.
func (a *Adapter) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	c := a.call(op)
	found, err := a.find(ctx, c)
	if err != nil {
		return adapters.LookupResult{}, err
	}
	if len(found) == 0 {
		return adapters.LookupResult{Status: adapters.NotFound}, nil
	}
	keyOnly := c.op
	keyOnly.Fields = nil // a lookup reports what holds the key, never a mismatch
	out, _ := a.keep(&call{op: keyOnly, key: c.key}, found, true)
	res := adapters.LookupResult{Status: adapters.Found, Outcome: out}
	if len(found) > 1 {
		res.Code = adapters.CodeDuplicateObjects
	}
	return res, nil
}

// find runs every lookup request and returns the objects holding the key,
// each once, in the order the requests and their answers give them.
func (a *Adapter) find(ctx context.Context, c *call) ([]object, error) {
	var out []object
	for i := range a.cfg.Lookup {
		got, err := a.lookupOne(ctx, i, c)
		if err != nil {
			return nil, err
		}
		for _, o := range got {
			if !slices.ContainsFunc(out, func(x object) bool { return x.id == o.id }) {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

func (a *Adapter) holds(l *LookupRequest, v gjson.Result, c *call) bool {
	if l.KeyPath != "" && v.Get(l.KeyPath).String() == c.key {
		return true
	}
	return l.MarkerPath != "" && strings.Contains(v.Get(l.MarkerPath).String(), adapters.Marker(c.key))
}

func (a *Adapter) lookupOne(ctx context.Context, i int, c *call) ([]object, error) {
	l := &a.cfg.Lookup[i]
	var body any
	if b := a.cp.lookupBodies[i]; b != nil {
		body = json.RawMessage(b.render(nil, c))
	}
	resp, err := a.client.JSON(ctx, l.Method, a.cfg.BaseURL+a.cp.lookups[i].render(c), body, nil)
	if err != nil {
		return nil, adapters.NoEffect(err)
	}
	if l.Mode == LookupGet && slices.Contains(l.NotFoundStatus, resp.StatusCode) {
		if l.NotFoundPath == "" || (gjson.ValidBytes(resp.Body) && gjson.GetBytes(resp.Body, l.NotFoundPath).String() == l.NotFoundEquals) {
			return nil, nil
		}
		return nil, adapters.Unexpected(adapters.Retry, "httpjson %s: lookup HTTP %d without the target's not-found answer", a.cfg.Name, resp.StatusCode)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := adapters.AsError(a.classify(resp))
		if e.Class == adapters.NeverRetry && e.Code != adapters.CodeAuthorizationDenied {
			e.Class = adapters.Retry // a read that failed changed nothing
		}
		return nil, adapters.NoEffect(e)
	}
	if !gjson.ValidBytes(resp.Body) {
		return nil, adapters.Unexpected(adapters.Retry, "httpjson %s: lookup answer is not JSON (%d bytes)", a.cfg.Name, len(resp.Body))
	}
	root := gjson.ParseBytes(resp.Body)
	if l.Mode == LookupGet {
		if !a.holds(l, root, c) {
			return nil, adapters.Unexpected(adapters.Retry, "httpjson %s: lookup answered for another key", a.cfg.Name)
		}
		o, err := a.objectOf(root, adapters.Retry)
		if err != nil {
			return nil, err
		}
		return []object{o}, nil
	}
	items := root
	if l.Items != "" {
		items = root.Get(l.Items)
	}
	if !items.IsArray() {
		return nil, adapters.Unexpected(adapters.Retry, "httpjson %s: lookup answer has no list at %q", a.cfg.Name, l.Items)
	}
	var out []object
	var bad error
	items.ForEach(func(_, v gjson.Result) bool {
		if !a.holds(l, v, c) {
			return true
		}
		o, err := a.objectOf(v, adapters.Retry)
		if err != nil {
			bad = err
			return false
		}
		out = append(out, o)
		return true
	})
	return out, bad
}
