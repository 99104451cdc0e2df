package bitrix24

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/sandbox"
)

// Defaults of Options.
const (
	DefaultUserID      = "1"
	DefaultWebhookCode = "sandbox4l777m8lapmdaz"
	// DefaultBucket and DefaultLeakPerSec are the non-Enterprise limits.
	DefaultBucket     = 50
	DefaultLeakPerSec = 2
)

// Portal plans: the REST limits' leaky bucket of each, as Bitrix24's REST
// documentation (limits.md) publishes them [OK].
const (
	// PlanStandard is every plan but Enterprise: 50 requests, leaking 2/s
	// (the emulator's default).
	PlanStandard = "standard"
	// PlanEnterprise: 250 requests, leaking 5/s.
	PlanEnterprise = "enterprise"
)

// PlanLimits returns the bucket and leak rate of a portal plan, or an error
// naming the plans for any other name.
func PlanLimits(plan string) (bucket, leakPerSec float64, err error) {
	switch plan {
	case PlanStandard:
		return DefaultBucket, DefaultLeakPerSec, nil
	case PlanEnterprise:
		return 250, 5, nil
	}
	return 0, 0, fmt.Errorf("bitrix24 portal plan %q: want %s or %s", plan, PlanStandard, PlanEnterprise)
}

// Options configure the emulator.
type Options struct {
	sandbox.Options
	UserID, WebhookCode string
	// Bucket and LeakPerSec set the leaky bucket (defaults 50 and 2/s);
	// a negative Bucket disables it.
	Bucket     float64
	LeakPerSec float64
}

// WithDefaults returns o with zero fields set.
func (o Options) WithDefaults() Options {
	o.Options = o.Options.WithDefaults()
	o.UserID = cmp.Or(o.UserID, DefaultUserID)
	o.WebhookCode = cmp.Or(o.WebhookCode, DefaultWebhookCode)
	o.Bucket = cmp.Or(o.Bucket, DefaultBucket)
	o.LeakPerSec = cmp.Or(o.LeakPerSec, DefaultLeakPerSec)
	return o
}

type object map[string]any

// Server is the Bitrix24 emulator.
type Server struct {
	*sandbox.Core
	opts   Options
	bucket *sandbox.LeakyBucket

	mu       sync.Mutex
	entities map[string][]object // "deal", "activity"
	nextID   int
}

// New builds the emulator.
func New(opts Options) *Server {
	s := &Server{opts: opts.WithDefaults()}
	// A negative Bucket makes a bucket without capacity: no limit.
	s.bucket = sandbox.NewLeakyBucket(s.opts.Bucket, s.opts.LeakPerSec, s.opts.Clock)
	s.resetState()
	s.Core = sandbox.NewCore(sandbox.Spec{
		Name: "bitrix24", Classify: classify, WriteError: writeInjected, OnReset: s.resetState,
		Routes: map[string]http.HandlerFunc{"/rest/{uid}/{code}/{method}": s.serve},
	}, s.opts.Options)
	return s
}

// WebhookURL returns the incoming-webhook root
// (http://127.0.0.1:port/rest/<uid>/<code>) once started.
func (s *Server) WebhookURL() string {
	return s.URL() + "/rest/" + s.opts.UserID + "/" + s.opts.WebhookCode
}

// Credentials returns the webhook user id and code.
func (s *Server) Credentials() (userID, code string) { return s.opts.UserID, s.opts.WebhookCode }

// Count returns the number of stored objects of an entity ("deal", "activity").
func (s *Server) Count(entity string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entities[entity])
}

func method(r *http.Request) string { return strings.TrimSuffix(r.PathValue("method"), ".json") }

func classify(r *http.Request) sandbox.Scope {
	if strings.HasSuffix(strings.TrimSuffix(r.URL.Path, ".json"), ".add") {
		return sandbox.ScopeCreate
	}
	return sandbox.ScopeRead
}

func (s *Server) resetState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entities = map[string][]object{}
	s.nextID = 100
	s.bucket.Reset()
}

func (s *Server) timeBlock() map[string]any {
	now := s.Now()
	return map[string]any{
		"start": float64(now.UnixMilli()) / 1000, "finish": float64(now.UnixMilli()) / 1000, "duration": 0.01,
		"processing": 0.005, "date_start": now.Format(time.RFC3339), "date_finish": now.Format(time.RFC3339),
		"operating": 0, "operating_reset_at": now.Add(10 * time.Minute).Unix(),
	}
}

func writeErr(w http.ResponseWriter, status int, code, desc string) {
	sandbox.WriteJSON(w, status, "", map[string]string{"error": code, "error_description": desc})
}

func writeInjected(w http.ResponseWriter, _ *http.Request, status int, _ time.Duration) {
	switch status {
	case http.StatusServiceUnavailable:
		writeErr(w, status, "QUERY_LIMIT_EXCEEDED", "Too many requests")
	case http.StatusTooManyRequests:
		writeErr(w, status, "OPERATION_TIME_LIMIT", "Method is blocked due to operation time limit.")
	default:
		writeErr(w, status, "INTERNAL_SERVER_ERROR", "Internal server error")
	}
}

var entityOf = map[string]string{
	"crm.deal.add": "deal", "crm.deal.list": "deal", "crm.activity.add": "activity", "crm.activity.list": "activity",
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		writeErr(w, http.StatusMethodNotAllowed, "ERROR_METHOD_NOT_ALLOWED", "Method not allowed")
		return
	}
	if !sandbox.SameSecret(r.PathValue("uid"), s.opts.UserID) || !sandbox.SameSecret(r.PathValue("code"), s.opts.WebhookCode) {
		writeErr(w, http.StatusUnauthorized, "NO_AUTH_FOUND", "Wrong authorization data")
		return
	}
	if ok, _ := s.bucket.Allow(); !ok {
		writeErr(w, http.StatusServiceUnavailable, "QUERY_LIMIT_EXCEEDED", "Too many requests")
		return
	}
	m := method(r)
	entity, known := entityOf[m]
	if !known {
		writeErr(w, http.StatusNotFound, "ERROR_METHOD_NOT_FOUND", "Method not found!")
		return
	}
	body, err := sandbox.ReadBody(r, 1<<20)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "", "Request body too large")
		return
	}
	var req struct {
		Fields map[string]any `json:"fields"`
		Filter map[string]any `json:"filter"`
		Select []string       `json:"select"`
		Start  any            `json:"start"`
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeErr(w, http.StatusBadRequest, "", "Parameter 'fields' must be array.")
			return
		}
	}
	if strings.HasSuffix(m, ".add") {
		s.add(w, r, entity, req.Fields)
		return
	}
	start, err := strconv.Atoi(str(req.Start))
	if req.Start == nil {
		start, err = 0, nil
	}
	if err != nil || start < 0 {
		writeErr(w, http.StatusBadRequest, "", "Parameter 'start' must be a non-negative integer.")
		return
	}
	s.list(w, entity, req.Filter, req.Select, start)
}

var currencies = map[string]bool{"RUB": true, "USD": true, "EUR": true, "KZT": true, "BYN": true, "UAH": true}

func str(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func (s *Server) add(w http.ResponseWriter, r *http.Request, entity string, f map[string]any) {
	if f == nil {
		writeErr(w, http.StatusBadRequest, "", "Parameter 'fields' must be array.")
		return
	}
	switch entity {
	case "deal":
		if str(f["TITLE"]) == "" {
			writeErr(w, http.StatusBadRequest, "", "Required fields are not filled: TITLE")
			return
		}
		if c := str(f["CURRENCY_ID"]); c != "" && !currencies[c] {
			writeErr(w, http.StatusBadRequest, "", "Currency not found")
			return
		}
		if o, err := strconv.ParseFloat(str(f["OPPORTUNITY"]), 64); f["OPPORTUNITY"] != nil && (err != nil || o < 0) {
			writeErr(w, http.StatusBadRequest, "", "Wrong value of field OPPORTUNITY")
			return
		}
	case "activity":
		if str(f["SUBJECT"]) == "" {
			writeErr(w, http.StatusBadRequest, "", "Не заполнено обязательное поле \"Тема\"")
			return
		}
		if _, err := strconv.Atoi(str(f["RESPONSIBLE_ID"])); err != nil {
			writeErr(w, http.StatusBadRequest, "", "Не указан ответственный")
			return
		}
	}
	sent := str(f["ORIGIN_ID"])
	obj := object{}
	for k, v := range f {
		obj[k] = str(v)
	}
	if sandbox.KeyIgnored(r.Context()) {
		// The connector maps the business fields only: the external-ID
		// fields are lost, the title and texts pass.
		delete(obj, "ORIGIN_ID")
		delete(obj, "ORIGINATOR_ID")
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	obj["ID"] = strconv.Itoa(id)
	obj[createdField[entity]] = s.Now().Format(time.RFC3339)
	s.entities[entity] = append(s.entities[entity], obj)
	s.mu.Unlock()
	s.Record(r.Context(), sent, entity, strconv.Itoa(id))
	sandbox.WriteJSON(w, http.StatusOK, "", map[string]any{"result": id, "time": s.timeBlock()})
}

// createdField is the creation-time field of each entity: DATE_CREATE for
// deals, CREATED for activities ([OK] crm activity fields).
var createdField = map[string]string{"deal": "DATE_CREATE", "activity": "CREATED"}

// pageSize is Bitrix24's fixed list page (50, with "next" for the start
// of the following page).
const pageSize = 50

// match applies one filter entry: "FIELD" or "=FIELD" (equal), ">=FIELD" or
// "<=FIELD" (compared as times when both sides parse as RFC 3339, else as
// numbers). Other operators are outside the emulated subset.
func match(o object, key string, want any) (ok, known bool) {
	op, field := "=", key
	for _, p := range []string{">=", "<=", "="} {
		if strings.HasPrefix(key, p) {
			op, field = p, key[len(p):]
			break
		}
	}
	if field == "" || strings.ContainsAny(field, "!<>%@=") {
		return false, false
	}
	got, w := str(o[field]), str(want)
	if op == "=" {
		return got == w, true
	}
	var cmp int
	if gt, err1 := time.Parse(time.RFC3339, got); err1 == nil {
		wt, err2 := time.Parse(time.RFC3339, w)
		if err2 != nil {
			return false, false
		}
		cmp = gt.Compare(wt)
	} else {
		gn, err1 := strconv.ParseFloat(got, 64)
		wn, err2 := strconv.ParseFloat(w, 64)
		if err1 != nil || err2 != nil {
			return false, true
		}
		switch {
		case gn < wn:
			cmp = -1
		case gn > wn:
			cmp = 1
		}
	}
	if op == ">=" {
		return cmp >= 0, true
	}
	return cmp <= 0, true
}

func (s *Server) list(w http.ResponseWriter, entity string, filter map[string]any, sel []string, start int) {
	s.mu.Lock()
	all := append([]object(nil), s.entities[entity]...)
	s.mu.Unlock()
	var matched []object
	for _, o := range all {
		ok := true
		for k, v := range filter {
			m, known := match(o, k, v)
			if !known {
				writeErr(w, http.StatusBadRequest, "", "Filter "+strconv.Quote(k)+" is outside the emulated subset.")
				return
			}
			if !m {
				ok = false
				break
			}
		}
		if ok {
			matched = append(matched, o)
		}
	}
	page, next := sandbox.Page(matched, start, pageSize)
	result := make([]object, 0, len(page))
	for _, o := range page {
		out := object{}
		if len(sel) == 0 || (len(sel) == 1 && sel[0] == "*") {
			for k, v := range o {
				out[k] = v
			}
		} else {
			for _, k := range sel {
				if v, has := o[k]; has {
					out[k] = v
				}
			}
			out["ID"] = o["ID"]
		}
		result = append(result, out)
	}
	body := map[string]any{"result": result, "total": len(matched), "time": s.timeBlock()}
	if next >= 0 {
		body["next"] = next
	}
	sandbox.WriteJSON(w, http.StatusOK, "", body)
}
