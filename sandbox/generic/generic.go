// Package generic is a configurable emulator of a JSON-over-HTTP target,
// the counterpart of a declared target (adapters/httpjson): its create
// endpoint, where it reads the operation key, whether it honours it (an
// idempotency store, or a unique external id answering a duplicate),
// lookup by key (GET one object) and search (a filtered list, with a lag
// before new objects show), all set by a Spec derived from the same
// declaration (the emulate package). It is a sandbox.Target with the
// shared ledger, faults and admin API.
//
// Under the ignore-key connector fault the target behaves as if no key
// had been sent: a header or query key is not honoured, a key body member
// is dropped before the object is stored. The ledger still counts the
// effect under the key the client sent.
//
// Imports: sandbox and the standard library.
package generic

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/sandbox"
)

// Spec sets the emulated target's contract.
type Spec struct {
	// Name is the emulator's name (the declared target's).
	Name string
	// Kind is the object kind the ledger records (default "object").
	Kind string
	// CreateMethod (default POST) and CreatePath ("/api/shipments") are
	// the create endpoint.
	CreateMethod string
	CreatePath   string
	// Exactly one of KeyHeader, KeyField (a body member path) and KeyQuery
	// says where the key comes.
	KeyHeader, KeyField, KeyQuery string
	// HonourKey: a repeated key with the same body answers the stored
	// object (200), with another body 409 {"error":"idempotency_key_reused"}.
	HonourKey bool
	// UniqueKey: a repeated key is refused with DuplicateStatus (default
	// 409) and DuplicateBody (default {"error":"duplicate_key"}).
	UniqueKey       bool
	DuplicateStatus int
	DuplicateBody   map[string]any
	// GetPath serves one object by key: "/api/shipments/by-key/{key}";
	// 404 NotFoundBody (default {"error":"not_found"}) when none.
	GetPath      string
	NotFoundBody map[string]any
	// SearchPath serves GET lists: each query parameter filters objects
	// whose body member path equals its value, except SearchText (a
	// substring of any string member) and "limit". SearchItems is the
	// answer member holding the list ("" = the answer is the list).
	SearchPath  string
	SearchItems string
	SearchText  string
	// SearchLag is how long a new object stays invisible to search.
	SearchLag time.Duration
	// IDField (default "id") and StatusField/Status (default
	// "state"/"new") are written into each object; KeyEchoField, when
	// set, holds the key the target stored.
	IDField, StatusField, Status string
	KeyEchoField                 string
	// Required body member paths must be present and not empty; Positive
	// ones, when present, must be numbers above zero: else 400
	// {"error":"validation"}.
	Required, Positive []string
	// Token, when set, is the Bearer token every request must carry.
	Token string
}

// Options configure the emulator.
type Options struct {
	sandbox.Options
	Spec Spec
}

// ErrInvalidSpec is returned by New for a spec it cannot serve.
var ErrInvalidSpec = errors.New("generic emulator: invalid spec")

type object struct {
	id      string
	key     string // the key stored ("" when none or ignored)
	body    map[string]any
	reqBody string // the request body as received (canonical JSON) for key reuse checks
	at      time.Time
}

// Server is the generic emulator.
type Server struct {
	*sandbox.Core
	spec Spec

	mu      sync.Mutex
	objects []*object
	byKey   map[string]*object
}

// New returns the emulator, not started.
func New(opts Options) (*Server, error) {
	s := opts.Spec
	s.Kind = cmp.Or(s.Kind, "object")
	s.CreateMethod = cmp.Or(s.CreateMethod, http.MethodPost)
	s.IDField = cmp.Or(s.IDField, "id")
	if s.StatusField == "" {
		s.StatusField, s.Status = "state", cmp.Or(s.Status, "new")
	}
	s.Status = cmp.Or(s.Status, "new")
	s.DuplicateStatus = cmp.Or(s.DuplicateStatus, http.StatusConflict)
	if s.DuplicateBody == nil {
		s.DuplicateBody = map[string]any{"error": "duplicate_key"}
	}
	if s.NotFoundBody == nil {
		s.NotFoundBody = map[string]any{"error": "not_found"}
	}
	n := 0
	for _, k := range []string{s.KeyHeader, s.KeyField, s.KeyQuery} {
		if k != "" {
			n++
		}
	}
	switch {
	case s.Name == "":
		return nil, fmt.Errorf("%w: a name is required", ErrInvalidSpec)
	case !strings.HasPrefix(s.CreatePath, "/"):
		return nil, fmt.Errorf("%w: create path must start with /", ErrInvalidSpec)
	case n != 1:
		return nil, fmt.Errorf("%w: exactly one of key header, key field and key query", ErrInvalidSpec)
	case s.HonourKey && s.UniqueKey:
		return nil, fmt.Errorf("%w: honour key and unique key exclude each other", ErrInvalidSpec)
	case s.GetPath != "" && strings.Count(s.GetPath, "{key}") != 1:
		return nil, fmt.Errorf("%w: the get path holds {key} once", ErrInvalidSpec)
	}
	srv := &Server{spec: s, byKey: map[string]*object{}}
	srv.Core = sandbox.NewCore(sandbox.Spec{Name: s.Name, Handler: http.HandlerFunc(srv.serve), OnReset: srv.reset}, opts.Options)
	return srv, nil
}

// Spec returns the effective spec.
func (s *Server) Spec() Spec { return s.spec }

func (s *Server) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects, s.byKey = nil, map[string]*object{}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.spec.Token != "" && !sandbox.SameSecret(sandbox.BearerToken(r), s.spec.Token) {
		sandbox.WriteJSON(w, http.StatusUnauthorized, "", map[string]string{"error": "unauthorized"})
		return
	}
	path := r.URL.Path
	switch {
	case r.Method == s.spec.CreateMethod && path == s.spec.CreatePath:
		s.create(w, r)
	case r.Method == http.MethodGet && s.spec.GetPath != "" && matchGet(s.spec.GetPath, path) != "":
		s.get(w, matchGet(s.spec.GetPath, path))
	case r.Method == http.MethodGet && s.spec.SearchPath != "" && path == s.spec.SearchPath:
		s.search(w, r)
	default:
		sandbox.WriteJSON(w, http.StatusNotFound, "", map[string]string{"error": "no_such_endpoint"})
	}
}

// matchGet returns the key a GET path holds for pattern, or "".
func matchGet(pattern, path string) string {
	pre, post, _ := strings.Cut(pattern, "{key}")
	if !strings.HasPrefix(path, pre) || !strings.HasSuffix(path, post) || len(path) <= len(pre)+len(post) {
		return ""
	}
	k := path[len(pre) : len(path)-len(post)]
	if strings.Contains(k, "/") {
		return ""
	}
	return k
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	raw, err := sandbox.ReadBody(r, 1<<20)
	if err != nil {
		sandbox.WriteJSON(w, http.StatusRequestEntityTooLarge, "", map[string]string{"error": "too_large"})
		return
	}
	var body map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil || body == nil {
			sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "message": "body must be a JSON object"})
			return
		}
	} else {
		body = map[string]any{}
	}
	key := ""
	switch {
	case s.spec.KeyHeader != "":
		key = r.Header.Get(s.spec.KeyHeader)
	case s.spec.KeyQuery != "":
		key = r.URL.Query().Get(s.spec.KeyQuery)
	default:
		key, _ = getPath(body, s.spec.KeyField).(string)
	}
	ignored := sandbox.KeyIgnored(r.Context())
	if ignored && s.spec.KeyField != "" {
		deletePath(body, s.spec.KeyField)
	}
	if msg := s.invalid(body); msg != "" {
		sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "message": msg})
		return
	}
	canon, _ := json.Marshal(body) // map keys sorted: a stable form of the request
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := key
	if ignored {
		stored = ""
	}
	if stored != "" {
		if o := s.byKey[stored]; o != nil {
			switch {
			case s.spec.HonourKey && o.reqBody == string(canon):
				sandbox.WriteJSON(w, http.StatusOK, "", s.view(o))
				return
			case s.spec.HonourKey:
				sandbox.WriteJSON(w, http.StatusConflict, "", map[string]string{"error": "idempotency_key_reused"})
				return
			case s.spec.UniqueKey:
				sandbox.WriteJSON(w, s.spec.DuplicateStatus, "", s.spec.DuplicateBody)
				return
			}
		}
	}
	o := &object{id: newID(), key: stored, body: body, reqBody: string(canon), at: s.Now()}
	s.objects = append(s.objects, o)
	if stored != "" && (s.spec.HonourKey || s.spec.UniqueKey || s.byKey[stored] == nil) {
		s.byKey[stored] = o
	}
	s.Record(r.Context(), key, s.spec.Kind, o.id)
	sandbox.WriteJSON(w, http.StatusCreated, "", s.view(o))
}

// invalid checks the declared rules; "" when the body passes.
func (s *Server) invalid(body map[string]any) string {
	for _, p := range s.spec.Required {
		if v := getPath(body, p); v == nil || v == "" {
			return p + " is required"
		}
	}
	for _, p := range s.spec.Positive {
		v := getPath(body, p)
		if v == nil {
			continue
		}
		if n, ok := v.(float64); !ok || n <= 0 {
			return p + " must be a number above zero"
		}
	}
	return ""
}

// view is the object as the target answers it.
func (s *Server) view(o *object) map[string]any {
	v := make(map[string]any, len(o.body)+4)
	for k, e := range o.body {
		v[k] = e
	}
	v[s.spec.IDField] = o.id
	v[s.spec.StatusField] = s.spec.Status
	v["created_at"] = o.at.UTC().Format(time.RFC3339Nano)
	if s.spec.KeyEchoField != "" {
		setPath(v, s.spec.KeyEchoField, o.key)
	}
	return v
}

func (s *Server) get(w http.ResponseWriter, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.byKey[key]; o != nil {
		sandbox.WriteJSON(w, http.StatusOK, "", s.view(o))
		return
	}
	sandbox.WriteJSON(w, http.StatusNotFound, "", s.spec.NotFoundBody)
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := sandbox.QueryLimit(q, "limit", 100, 1000)
	if !ok {
		sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "message": "limit: 1..1000"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	visible := s.Now().Add(-s.spec.SearchLag)
	items := []any{}
	for _, o := range s.objects {
		if o.at.After(visible) {
			continue
		}
		v := s.view(o)
		if !matches(v, q, s.spec.SearchText) {
			continue
		}
		items = append(items, v)
		if len(items) == limit {
			break
		}
	}
	if s.spec.SearchItems == "" {
		sandbox.WriteJSON(w, http.StatusOK, "", items)
		return
	}
	out := map[string]any{}
	setPath(out, s.spec.SearchItems, items)
	sandbox.WriteJSON(w, http.StatusOK, "", out)
}

func matches(v map[string]any, q map[string][]string, textParam string) bool {
	for name, vals := range q {
		if name == "limit" || len(vals) == 0 {
			continue
		}
		want := vals[0]
		if name == textParam {
			if !containsText(v, want) {
				return false
			}
			continue
		}
		got := getPath(v, name)
		if got == nil || fmt.Sprint(got) != want {
			return false
		}
	}
	return true
}

func containsText(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, s)
	case map[string]any:
		for _, e := range x {
			if containsText(e, s) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if containsText(e, s) {
				return true
			}
		}
	}
	return false
}

func getPath(m map[string]any, path string) any {
	var v any = m
	for _, p := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

func deletePath(m map[string]any, path string) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	delete(m, parts[len(parts)-1])
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "obj_" + hex.EncodeToString(b[:])
}

// Objects returns how many objects the target holds.
func (s *Server) Objects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}
