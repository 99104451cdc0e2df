package onec

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/idemgate/idemgate/sandbox"
)

// Defaults of Options.
const (
	DefaultBasePath     = "/base"
	DefaultUser         = "integration"
	DefaultPassword     = "sandbox-1c-password"
	DefaultDocument     = "Document_СчетНаОплатуПокупателю"
	DefaultKeyAttribute = "ВнешнийКлюч"
	// MaxKeyLen is the longest Idempotency-Key the HTTP service accepts (the
	// register dimension is String(100)).
	MaxKeyLen = 100
)

// Options configure the emulator.
type Options struct {
	sandbox.Options
	// BasePath is the publication path of the infobase (default "/base").
	BasePath string
	// User and Password are the infobase user for HTTP Basic.
	User, Password string
	// Document is the OData entity set of invoices.
	Document string
	// KeyAttribute is the extension attribute holding our key over OData.
	KeyAttribute string
}

// WithDefaults returns o with zero fields set.
func (o Options) WithDefaults() Options {
	o.Options = o.Options.WithDefaults()
	if o.BasePath == "" {
		o.BasePath = DefaultBasePath
	}
	o.BasePath = "/" + strings.Trim(o.BasePath, "/")
	o.User = cmp.Or(o.User, DefaultUser)
	o.Password = cmp.Or(o.Password, DefaultPassword)
	o.Document = cmp.Or(o.Document, DefaultDocument)
	o.KeyAttribute = cmp.Or(o.KeyAttribute, DefaultKeyAttribute)
	return o
}

// document is an invoice in the infobase.
type document struct {
	Ref         string
	Number      string
	Date        time.Time
	Key         string // extension attribute; "" when none was stored
	OrderID     string
	CustomerID  string
	AmountMinor int64
	Currency    string
	DueDate     string
	Comment     string
	Posted      bool
	Deleted     bool
	// CancelledBy is the Ref of the cancelling document ("" while the
	// invoice stands).
	CancelledBy string
	Version     int
	bodyHash    string // HTTP service: hash of the request that created it
}

// Server is the 1C emulator.
type Server struct {
	*sandbox.Core
	opts Options

	mu       sync.Mutex
	docs     []*document
	register map[string]*document // the key register of the HTTP service
	// markers indexes the oldest document whose comment carries each
	// "[op:<key>]" marker: the HTTP service's fallback for a key the
	// register lacks, without reading every document.
	markers  map[string]*document
	keyLocks map[string]*sync.Mutex
	// cancels is the cancellations' key register; cancelDocs every
	// cancelling document, in order (cancel.go).
	cancels    map[string]*cancellation
	cancelDocs []*cancellation
}

// New builds the emulator.
func New(opts Options) *Server {
	s := &Server{opts: opts.WithDefaults()}
	s.resetState()
	svc := s.opts.BasePath + "/hs/integration/invoices"
	cancels := s.opts.BasePath + "/hs/integration/cancellations"
	od := s.opts.BasePath + "/odata/standard.odata/"
	s.Core = sandbox.NewCore(sandbox.Spec{Name: "onec", WriteError: writeInjected, OnReset: s.resetState, Wrap: s.auth,
		Routes: map[string]http.HandlerFunc{
			"POST " + svc: s.createInvoice, "GET " + svc + "/{key}": s.getInvoice,
			"POST " + svc + "/{ref}/cancel": s.cancelInvoice, "GET " + cancels + "/{key}": s.getCancellation,
			"POST " + od + "{set}": s.odataCreate, "GET " + od + "{set}": s.odataList,
		},
	}, s.opts.Options)
	return s
}

// Credentials returns the infobase user the emulator accepts.
func (s *Server) Credentials() (user, password string) { return s.opts.User, s.opts.Password }

// BaseURL returns the infobase root URL (URL() + BasePath) once started.
func (s *Server) BaseURL() string { return s.URL() + s.opts.BasePath }

// Documents returns the number of invoices in the base, deleted included.
func (s *Server) Documents() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.docs)
}

func (s *Server) resetState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs = nil
	s.markers = make(map[string]*document)
	s.register = make(map[string]*document)
	s.keyLocks = make(map[string]*sync.Mutex)
	s.cancels = make(map[string]*cancellation)
	s.cancelDocs = nil
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sandbox.BasicAuthorized(r, s.opts.User, s.opts.Password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="1C:Enterprise"`)
			if isOData(r) {
				odataError(w, http.StatusUnauthorized, "401", "Не удалось выполнить аутентификацию")
				return
			}
			sandbox.WriteJSON(w, http.StatusUnauthorized, "", map[string]string{"error": "unauthorized"})
			return
		}
		h(w, r)
	}
}

func isOData(r *http.Request) bool { return strings.Contains(r.URL.Path, "/odata/") }

// writeInjected answers injected faults in the path's own error shape.
func writeInjected(w http.ResponseWriter, r *http.Request, status int, retryAfter time.Duration) {
	if isOData(r) {
		odataError(w, status, "-1", "Ошибка при выполнении операции над данными")
		return
	}
	switch status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		sandbox.WriteJSON(w, status, "", map[string]any{"error": "lock_timeout", "retry_after": sandbox.RetryAfterSeconds(retryAfter)})
	default:
		sandbox.WriteJSON(w, status, "", map[string]string{"error": "internal"})
	}
}

// invoiceRequest is the HTTP service's request body.
type invoiceRequest struct {
	OrderID     string `json:"order_id"`
	CustomerID  string `json:"customer_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	DueDate     string `json:"due_date,omitempty"`
	Description string `json:"description,omitempty"`
}

var currencies = map[string]bool{"RUB": true, "USD": true, "EUR": true, "CNY": true, "KZT": true, "BYN": true}

func (q invoiceRequest) validate() string {
	switch {
	case q.OrderID == "":
		return "Не заполнено поле order_id"
	case q.CustomerID == "":
		return "Не заполнено поле customer_id"
	case strings.HasPrefix(q.CustomerID, "unknown"):
		return "Контрагент не найден"
	case q.AmountMinor <= 0:
		return "Сумма документа должна быть больше нуля"
	case !currencies[q.Currency]:
		return "Валюта не найдена"
	}
	if q.DueDate != "" {
		if _, err := time.Parse("2006-01-02", q.DueDate); err != nil {
			return "Неверный формат due_date"
		}
	}
	return ""
}

func (q invoiceRequest) hash() string {
	b, _ := json.Marshal(q)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

var refNamespace = uuid.MustParse("6f1c3a2e-1c00-5e00-8000-00000000a1c1")

func (s *Server) lockKey(key string) func() {
	s.mu.Lock()
	l := s.keyLocks[key]
	if l == nil {
		l = &sync.Mutex{}
		s.keyLocks[key] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (s *Server) createInvoice(w http.ResponseWriter, r *http.Request) {
	sent := r.Header.Get("Idempotency-Key")
	key := sent
	if sandbox.KeyIgnored(r.Context()) {
		key = ""
	}
	body, err := sandbox.ReadBody(r, 1<<20)
	if err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "detail": "Тело запроса слишком велико"})
		return
	}
	var q invoiceRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "detail": "Тело запроса не является JSON счёта"})
		return
	}
	if len(key) > MaxKeyLen {
		sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "detail": "Idempotency-Key длиннее 100 символов"})
		return
	}
	if msg := q.validate(); msg != "" {
		sandbox.WriteJSON(w, http.StatusUnprocessableEntity, "", map[string]string{"error": "validation", "detail": msg})
		return
	}
	h := q.hash()
	if key != "" {
		// The managed lock on the register record: concurrent duplicates wait.
		unlock := s.lockKey(key)
		defer unlock()
		s.mu.Lock()
		d := s.register[key]
		s.mu.Unlock()
		if d != nil {
			if d.bodyHash != h {
				sandbox.WriteJSON(w, http.StatusConflict, "", map[string]string{"error": "idempotency_key_reused", "detail": "payload hash differs"})
				return
			}
			sandbox.WriteJSON(w, http.StatusOK, "", invoiceAnswer(d, true))
			return
		}
	}
	d := s.newDocument(key, q)
	d.bodyHash = h
	d.Posted = true
	if key != "" {
		d.Ref = uuid.NewSHA1(refNamespace, []byte(key)).String()
		s.mu.Lock()
		s.register[key] = d
		s.mu.Unlock()
	}
	s.Record(r.Context(), sent, EffectInvoice, d.Ref)
	sandbox.WriteJSON(w, http.StatusCreated, "", invoiceAnswer(d, false))
}

func (s *Server) newDocument(key string, q invoiceRequest) *document {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.docs) + 1
	d := &document{
		Ref:         uuid.NewSHA1(refNamespace, []byte("doc-"+strconv.Itoa(n))).String(),
		Number:      fmt.Sprintf("0000-%06d", n),
		Date:        s.Now().UTC(),
		Key:         key,
		OrderID:     q.OrderID,
		CustomerID:  q.CustomerID,
		AmountMinor: q.AmountMinor,
		Currency:    q.Currency,
		DueDate:     q.DueDate,
		Comment:     q.Description,
		Version:     1,
	}
	s.docs = append(s.docs, d)
	for _, k := range markersIn(d.Comment) {
		if s.markers[k] == nil {
			s.markers[k] = d // the oldest document carrying the marker
		}
	}
	return d
}

// markersIn returns every key k for which comment contains "[op:k]".
func markersIn(comment string) []string {
	var keys []string
	for i := 0; ; {
		j := strings.Index(comment[i:], "[op:")
		if j < 0 {
			return keys
		}
		start := i + j + len("[op:")
		for e := start; e < len(comment); e++ {
			if comment[e] == ']' {
				keys = append(keys, comment[start:e])
			}
		}
		i = start
	}
}

func invoiceAnswer(d *document, replayed bool) map[string]any {
	return map[string]any{"key": d.Key, "ref": d.Ref, "number": d.Number, "posted": d.Posted, "replayed": replayed}
}

// getInvoice answers by the key register; when the register has no record
// (the key never reached the service: a connector dropped the header), by
// the oldest document whose comment carries the "[op:<key>]" marker, with
// "found_by": "marker" and an empty "key".
func (s *Server) getInvoice(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	d := s.register[key]
	by := "register"
	if d == nil {
		// Documents are never deleted here (DeletionMark stays false), so
		// the oldest document with the marker is the index's.
		if doc := s.markers[key]; doc != nil && !doc.Deleted {
			d, by = doc, "marker"
		}
	}
	s.mu.Unlock()
	if d == nil {
		sandbox.WriteJSON(w, http.StatusNotFound, "", map[string]string{"error": "not_found"})
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, "", map[string]any{
		"key": d.Key, "ref": d.Ref, "number": d.Number, "posted": d.Posted, "state": "done",
		"order_id": d.OrderID, "amount_minor": d.AmountMinor, "currency": d.Currency, "found_by": by,
	})
}
