package amocrm

import (
	"cmp"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/sandbox"
)

// Defaults of Options.
const (
	DefaultToken      = "sandbox-amocrm-long-lived-token"
	DefaultKeyFieldID = 1278898021
	DefaultRatePerSec = 7
)

// Options configure the emulator.
type Options struct {
	sandbox.Options
	// Token is the accepted Bearer token.
	Token string
	// KeyFieldID is the id of the text custom field that may hold our key;
	// any other field_id is refused (NotSupportedChoice).
	KeyFieldID int64
	// RatePerSec is the request limit (default 7); negative disables it.
	RatePerSec float64
	// SearchLag delays a lead's visibility in query= search.
	SearchLag time.Duration
}

// WithDefaults returns o with zero fields set.
func (o Options) WithDefaults() Options {
	o.Options = o.Options.WithDefaults()
	o.Token = cmp.Or(o.Token, DefaultToken)
	o.KeyFieldID = cmp.Or(o.KeyFieldID, DefaultKeyFieldID)
	o.RatePerSec = cmp.Or(o.RatePerSec, DefaultRatePerSec)
	return o
}

type value struct {
	Value any `json:"value"`
}

type customField struct {
	FieldID int64   `json:"field_id"`
	Values  []value `json:"values"`
}

type tag struct {
	ID   int64  `json:"id,omitempty"`
	Name string `json:"name"`
}

type lead struct {
	ID                 int64         `json:"id"`
	Name               string        `json:"name"`
	Price              int64         `json:"price"`
	StatusID           int64         `json:"status_id,omitempty"`
	PipelineID         int64         `json:"pipeline_id,omitempty"`
	CustomFieldsValues []customField `json:"custom_fields_values"`
	Embedded           struct {
		Tags []tag `json:"tags"`
	} `json:"_embedded"`
	CreatedAt int64  `json:"created_at"`
	UpdatedAt int64  `json:"updated_at"`
	RequestID string `json:"request_id,omitempty"`

	visibleAt time.Time
}

type task struct {
	ID                int64  `json:"id"`
	Text              string `json:"text"`
	CompleteTill      int64  `json:"complete_till"`
	EntityID          int64  `json:"entity_id,omitempty"`
	EntityType        string `json:"entity_type,omitempty"`
	TaskTypeID        int64  `json:"task_type_id"`
	ResponsibleUserID int64  `json:"responsible_user_id"`
	IsCompleted       bool   `json:"is_completed"`
	CreatedAt         int64  `json:"created_at"`
	UpdatedAt         int64  `json:"updated_at"`
	RequestID         string `json:"request_id,omitempty"`
}

// Server is the amoCRM emulator.
type Server struct {
	*sandbox.Core
	opts   Options
	bucket *sandbox.LeakyBucket

	mu     sync.Mutex
	leads  []*lead
	tasks  []*task
	nextID int64
}

// New builds the emulator.
func New(opts Options) *Server {
	s := &Server{opts: opts.WithDefaults()}
	// A negative rate makes a bucket without capacity: no limit.
	s.bucket = sandbox.NewLeakyBucket(s.opts.RatePerSec, s.opts.RatePerSec, s.opts.Clock)
	s.resetState()
	s.Core = sandbox.NewCore(sandbox.Spec{Name: "amocrm", WriteError: writeInjected, OnReset: s.resetState, Wrap: s.auth,
		Routes: map[string]http.HandlerFunc{
			"POST /api/v4/leads": s.addLeads, "GET /api/v4/leads": s.listLeads,
			"POST /api/v4/tasks": s.addTasks, "GET /api/v4/tasks": s.listTasks,
		},
	}, s.opts.Options)
	return s
}

// Token returns the accepted Bearer token.
func (s *Server) Token() string { return s.opts.Token }

// KeyFieldID returns the id of the key custom field.
func (s *Server) KeyFieldID() int64 { return s.opts.KeyFieldID }

func (s *Server) resetState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leads, s.tasks, s.nextID = nil, nil, 17000
	s.bucket.Reset()
}

func problem(w http.ResponseWriter, status int, title, detail string, extra map[string]any) {
	body := map[string]any{"title": title, "type": "https://httpstatus.es/" + strconv.Itoa(status), "status": status, "detail": detail}
	for k, v := range extra {
		body[k] = v
	}
	sandbox.WriteJSON(w, status, "application/problem+json", body)
}

func writeInjected(w http.ResponseWriter, _ *http.Request, status int, _ time.Duration) {
	problem(w, status, http.StatusText(status), http.StatusText(status), nil)
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if tok := sandbox.BearerToken(r); tok == "" || !sandbox.SameSecret(tok, s.opts.Token) {
			problem(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized", nil)
			return
		}
		if ok, _ := s.bucket.Allow(); !ok {
			problem(w, http.StatusTooManyRequests, "Too Many Requests", "Too many requests", nil)
			return
		}
		h(w, r)
	}
}

func validation(w http.ResponseWriter, idx int, code, path, detail string) {
	problem(w, http.StatusBadRequest, "Bad Request", "Request validation failed", map[string]any{
		"validation-errors": []any{map[string]any{"request_id": strconv.Itoa(idx), "errors": []any{
			map[string]string{"code": code, "path": path, "detail": detail},
		}}},
	})
}

func (s *Server) now() time.Time { return s.Now() }

// readBatch reads a create request: a JSON array of 1 to 250 objects, or
// answers that it is not one.
func readBatch[T any](w http.ResponseWriter, r *http.Request) ([]T, bool) {
	body, err := sandbox.ReadBody(r, 1<<20)
	var in []T
	if err != nil || json.Unmarshal(body, &in) != nil || len(in) == 0 || len(in) > 250 {
		problem(w, http.StatusBadRequest, "Bad Request", "Request body must be a non-empty array", nil)
		return nil, false
	}
	return in, true
}

func (s *Server) addLeads(w http.ResponseWriter, r *http.Request) {
	in, ok := readBatch[lead](w, r)
	if !ok {
		return
	}
	for i, l := range in {
		if l.Price < 0 {
			validation(w, i, "InvalidType", "price", "price must be a non-negative integer")
			return
		}
		for j, cf := range l.CustomFieldsValues {
			if cf.FieldID != s.opts.KeyFieldID {
				validation(w, i, "NotSupportedChoice", "custom_fields_values."+strconv.Itoa(j)+".field_id", "field not found")
				return
			}
		}
	}
	now := s.now()
	out := make([]map[string]any, 0, len(in))
	for _, l := range in {
		sent := s.leadKey(&l)
		if sandbox.KeyIgnored(r.Context()) {
			l.CustomFieldsValues, l.Embedded.Tags = nil, nil
		}
		s.mu.Lock()
		s.nextID++
		l.ID = s.nextID
		l.CreatedAt, l.UpdatedAt = now.Unix(), now.Unix()
		l.visibleAt = now.Add(s.opts.SearchLag)
		rid := l.RequestID
		l.RequestID = "" // echoed, never stored
		stored := l
		s.leads = append(s.leads, &stored)
		s.mu.Unlock()
		s.Record(r.Context(), sent, "lead", strconv.FormatInt(l.ID, 10))
		out = append(out, map[string]any{"id": l.ID, "request_id": rid, "_links": map[string]any{"self": map[string]string{"href": "/api/v4/leads/" + strconv.FormatInt(l.ID, 10)}}})
	}
	sandbox.WriteJSON(w, http.StatusOK, "application/hal+json", map[string]any{"_links": map[string]any{}, "_embedded": map[string]any{"leads": out}})
}

// leadKey is the key the client sent: the key field's value, else a tag,
// else the "[op:<key>]" marker of the name.
func (s *Server) leadKey(l *lead) string {
	for _, cf := range l.CustomFieldsValues {
		if cf.FieldID == s.opts.KeyFieldID && len(cf.Values) > 0 {
			if v, ok := cf.Values[0].Value.(string); ok {
				return v
			}
		}
	}
	for _, t := range l.Embedded.Tags {
		if strings.Contains(t.Name, ":") {
			return t.Name
		}
	}
	return taskKey(l.Name)
}

func (s *Server) listLeads(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("query")
	now := s.now()
	s.mu.Lock()
	var found []*lead
	for _, l := range s.leads {
		if q == "" || (!now.Before(l.visibleAt) && matches(l, q)) {
			c := *l
			found = append(found, &c)
		}
	}
	s.mu.Unlock()
	if len(found) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	limit := limitOf(r)
	if len(found) > limit {
		found = found[:limit]
	}
	sandbox.WriteJSON(w, http.StatusOK, "application/hal+json", map[string]any{"_page": 1, "_embedded": map[string]any{"leads": found}})
}

// matches is the fuzzy full-text search: every word of q appears somewhere.
func matches(l *lead, q string) bool {
	var hay strings.Builder
	hay.WriteString(strings.ToLower(l.Name))
	for _, cf := range l.CustomFieldsValues {
		for _, v := range cf.Values {
			if s, ok := v.Value.(string); ok {
				hay.WriteString(" " + strings.ToLower(s))
			}
		}
	}
	for _, t := range l.Embedded.Tags {
		hay.WriteString(" " + strings.ToLower(t.Name))
	}
	h := hay.String()
	for _, word := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return r == ' ' || r == ':' }) {
		if !strings.Contains(h, word) {
			return false
		}
	}
	return true
}

func limitOf(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n <= 0 {
		return 50
	}
	return min(n, 250)
}

// taskKey extracts the "[op:<key>]" marker of a task text.
func taskKey(text string) string {
	_, rest, ok := strings.Cut(text, "[op:")
	if !ok {
		return ""
	}
	k, _, ok := strings.Cut(rest, "]")
	if !ok {
		return ""
	}
	return k
}

func (s *Server) addTasks(w http.ResponseWriter, r *http.Request) {
	in, ok := readBatch[task](w, r)
	if !ok {
		return
	}
	for i, t := range in {
		switch {
		case strings.TrimSpace(t.Text) == "":
			validation(w, i, "NotBlank", "text", "This value should not be blank.")
			return
		case t.CompleteTill <= 0:
			validation(w, i, "NotBlank", "complete_till", "This value should not be blank.")
			return
		case t.ResponsibleUserID <= 0:
			validation(w, i, "InvalidType", "responsible_user_id", "This value should be a positive integer.")
			return
		}
	}
	now := s.now()
	out := make([]map[string]any, 0, len(in))
	for _, t := range in {
		// The ignore-key connector keeps the text: it is the task itself.
		sent := taskKey(t.Text)
		s.mu.Lock()
		s.nextID++
		t.ID = s.nextID
		t.CreatedAt, t.UpdatedAt = now.Unix(), now.Unix()
		rid := t.RequestID
		t.RequestID = ""
		stored := t
		s.tasks = append(s.tasks, &stored)
		s.mu.Unlock()
		s.Record(r.Context(), sent, "task", strconv.FormatInt(t.ID, 10))
		out = append(out, map[string]any{"id": t.ID, "request_id": rid})
	}
	sandbox.WriteJSON(w, http.StatusOK, "application/hal+json", map[string]any{"_links": map[string]any{}, "_embedded": map[string]any{"tasks": out}})
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, _ := strconv.ParseInt(q.Get("filter[updated_at][from]"), 10, 64)
	to, err := strconv.ParseInt(q.Get("filter[updated_at][to]"), 10, 64)
	if err != nil {
		to = 1 << 62
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = 1
	}
	limit := limitOf(r)
	s.mu.Lock()
	var found []*task
	for _, t := range s.tasks {
		if t.UpdatedAt >= from && t.UpdatedAt <= to {
			c := *t
			found = append(found, &c)
		}
	}
	s.mu.Unlock()
	sort.SliceStable(found, func(i, j int) bool { return found[i].ID > found[j].ID })
	found, _ = sandbox.Page(found, (page-1)*limit, limit)
	if len(found) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, "application/hal+json", map[string]any{"_page": page, "_embedded": map[string]any{"tasks": found}})
}
