package yookassa

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/sandbox"
)

// Name is the emulator's registry name.
const Name = "yookassa"

// Saved payment methods the emulator declines by default.
const (
	MethodInsufficientFunds = "sandbox-insufficient-funds"
	MethodDeclined          = "sandbox-general-decline"
)

// Defaults.
const (
	DefaultShopID    = "100500"
	DefaultSecretKey = "test_sandbox_secret_key"
	DefaultKeyTTL    = 24 * time.Hour
	DefaultMaxKeyLen = 64
)

// Options configure the emulator.
type Options struct {
	sandbox.Options
	// ShopID and SecretKey are the accepted Basic credentials.
	ShopID    string
	SecretKey string
	// KeyTTL is how long an Idempotence-Key is remembered (24h).
	KeyTTL time.Duration
	// MaxKeyLen is the longest Idempotence-Key accepted (64, [3P]).
	MaxKeyLen int
	// Declines maps saved payment methods to the cancellation reason the
	// payment network gives. Nil: MethodInsufficientFunds →
	// insufficient_funds, MethodDeclined → general_decline.
	Declines map[string]string
	// Pending, when set, leaves new payments "pending" (the 30-second
	// undecided window) until Settle is called.
	Pending bool
}

// WithDefaults fills zero fields.
func (o Options) WithDefaults() Options {
	o.Options = o.Options.WithDefaults()
	if o.ShopID == "" {
		o.ShopID = DefaultShopID
	}
	if o.SecretKey == "" {
		o.SecretKey = DefaultSecretKey
	}
	if o.KeyTTL <= 0 {
		o.KeyTTL = DefaultKeyTTL
	}
	if o.MaxKeyLen <= 0 {
		o.MaxKeyLen = DefaultMaxKeyLen
	}
	if o.Declines == nil {
		o.Declines = map[string]string{
			MethodInsufficientFunds: "insufficient_funds",
			MethodDeclined:          "general_decline",
		}
	}
	return o
}


// Server is the YooKassa emulator.
type Server struct {
	*sandbox.Core
	opts Options

	// mu serialises every request that may create an object, so concurrent
	// requests with one key see one another's stored answer.
	mu       sync.Mutex
	payments map[string]*payment
	refunds  map[string]*refund
	order    []string // payment ids in creation order
	rorder   []string // refund ids in creation order
	keys     map[string]*stored
}

type amount struct {
	Value    string `json:"value"`
	Currency string `json:"currency"`
}

type cancellation struct {
	Party  string `json:"party"`
	Reason string `json:"reason"`
}

type payment struct {
	ID                  string            `json:"id"`
	Status              string            `json:"status"`
	Paid                bool              `json:"paid"`
	Amount              amount            `json:"amount"`
	Description         string            `json:"description,omitempty"`
	CreatedAt           string            `json:"created_at"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	CancellationDetails *cancellation     `json:"cancellation_details,omitempty"`
	Refundable          bool              `json:"refundable"`
	Test                bool              `json:"test"`

	created  time.Time
	minor    int64
	refunded int64
}

type refund struct {
	ID          string            `json:"id"`
	PaymentID   string            `json:"payment_id"`
	Status      string            `json:"status"`
	Amount      amount            `json:"amount"`
	Description string            `json:"description,omitempty"`
	CreatedAt   string            `json:"created_at"`
	Metadata    map[string]string `json:"metadata,omitempty"`

	created time.Time
}

type stored struct {
	hash   string
	status int
	body   []byte
	at     time.Time
}

// New builds the emulator (not started).
func New(opts Options) *Server {
	s := &Server{opts: opts.WithDefaults()}
	s.resetState()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/payments", s.auth(s.createPayment))
	mux.HandleFunc("GET /v3/payments", s.auth(s.listPayments))
	mux.HandleFunc("GET /v3/payments/{id}", s.auth(s.getPayment))
	mux.HandleFunc("POST /v3/refunds", s.auth(s.createRefund))
	mux.HandleFunc("GET /v3/refunds", s.auth(s.listRefunds))
	mux.HandleFunc("GET /v3/refunds/{id}", s.auth(s.getRefund))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "Resource not found", "")
	})
	s.Core = sandbox.NewCore(sandbox.Spec{
		Name:       Name,
		Handler:    mux,
		Classify:   classify,
		WriteError: s.writeInjected,
		OnReset:    s.resetState,
	}, s.opts.Options)
	return s
}

// Credentials returns the accepted shop id and secret key.
func (s *Server) Credentials() (shopID, secretKey string) { return s.opts.ShopID, s.opts.SecretKey }

// Settle finishes every pending payment: succeeded, or canceled when its
// method is in Declines.
func (s *Server) Settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.payments {
		if p.Status == "pending" {
			p.Status, p.Paid, p.Refundable = "succeeded", true, true
		}
	}
}

func classify(r *http.Request) sandbox.Scope {
	if r.Method == http.MethodPost {
		return sandbox.ScopeCreate
	}
	return sandbox.ScopeRead
}

func (s *Server) resetState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.payments = make(map[string]*payment)
	s.refunds = make(map[string]*refund)
	s.order, s.rorder = nil, nil
	s.keys = make(map[string]*stored)
}

func (s *Server) writeInjected(w http.ResponseWriter, _ *http.Request, status int, retryAfter time.Duration) {
	sandbox.SetRetryAfter(w, retryAfter)
	switch status {
	case http.StatusTooManyRequests:
		writeError(w, status, "too_many_requests", "Превышен лимит запросов в единицу времени", "")
	default:
		writeError(w, status, "internal_server_error", "Результат обработки запроса неизвестен", "")
	}
}

// writeError writes YooKassa's error document.
func writeError(w http.ResponseWriter, status int, code, description, parameter string) {
	body := map[string]string{"type": "error", "id": newUUID(), "code": code, "description": description}
	if parameter != "" {
		body["parameter"] = parameter
	}
	sandbox.WriteJSON(w, status, "", body)
}

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(s.opts.ShopID)) != 1 ||
			subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.SecretKey)) != 1 {
			writeError(w, http.StatusUnauthorized, "invalid_credentials", "Error in shopId or secret key. Check their validity.", "")
			return
		}
		next(w, r)
	}
}

// idempotent runs create under the key store: a replay returns the stored
// answer, a different body under the same key is refused, and only answers
// of requests that reached processing are stored.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, create func(key string, body []byte) (int, any, bool)) {
	key := r.Header.Get("Idempotence-Key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "Idempotence-Key header is required", "Idempotence-Key")
		return
	}
	if len(key) > s.opts.MaxKeyLen {
		writeError(w, http.StatusBadRequest, "invalid_request", "Idempotence-Key is too long", "Idempotence-Key")
		return
	}
	body, err := sandbox.ReadBody(r, 1<<20)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "Request body is too large", "")
		return
	}
	hash, ok := canonicalHash(body)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request", "Request body is not valid JSON", "")
		return
	}
	ignored := sandbox.KeyIgnored(r.Context())
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now()
	if !ignored {
		if st, ok := s.keys[key]; ok && now.Sub(st.at) < s.opts.KeyTTL {
			if st.hash != hash {
				writeError(w, http.StatusBadRequest, "invalid_request", "Idempotence key duplicated", "Idempotence-Key")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(st.status)
			_, _ = w.Write(st.body)
			return
		}
	}
	status, v, keep := create(key, body)
	out, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal_server_error", "encode", "")
		return
	}
	if keep && !ignored {
		s.keys[key] = &stored{hash: hash, status: status, body: out, at: now}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

type errDoc struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Code        string `json:"code"`
	Description string `json:"description"`
	Parameter   string `json:"parameter,omitempty"`
}

func invalid(param, desc string) (int, any, bool) {
	return http.StatusBadRequest, errDoc{Type: "error", ID: newUUID(), Code: "invalid_request", Description: desc, Parameter: param}, false
}

var currencies = map[string]bool{"RUB": true, "USD": true, "EUR": true, "BYN": true, "KZT": true, "UZS": true}

func checkAmount(a amount) (int64, string) {
	minor, ok := parseMinor(a.Value)
	if !ok || minor <= 0 {
		return 0, "amount.value"
	}
	if !currencies[a.Currency] {
		return 0, "amount.currency"
	}
	return minor, ""
}

func checkMetadata(m map[string]string) bool {
	if len(m) > 16 {
		return false
	}
	for k, v := range m {
		if k == "" || len(k) > 32 || len(v) > 512 {
			return false
		}
	}
	return true
}

func (s *Server) createPayment(w http.ResponseWriter, r *http.Request) {
	s.idempotent(w, r, func(key string, body []byte) (int, any, bool) {
		var req struct {
			Amount          amount            `json:"amount"`
			Capture         *bool             `json:"capture"`
			PaymentMethodID string            `json:"payment_method_id"`
			Description     string            `json:"description"`
			Metadata        map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return invalid("", "Request body has fields of wrong types")
		}
		minor, bad := checkAmount(req.Amount)
		if bad != "" {
			return invalid(bad, "Invalid value of "+bad)
		}
		if req.PaymentMethodID == "" || len(req.PaymentMethodID) > 64 {
			return invalid("payment_method_id", "A saved payment method is required")
		}
		if len([]rune(req.Description)) > 128 {
			return invalid("description", "Description is longer than 128 characters")
		}
		if !checkMetadata(req.Metadata) {
			return invalid("metadata", "Invalid metadata")
		}
		now := s.Now().UTC()
		p := &payment{
			ID: newUUID(), Amount: req.Amount, Description: req.Description,
			CreatedAt: now.Format("2006-01-02T15:04:05.000Z"), Metadata: req.Metadata, Test: true,
			created: now, minor: minor,
		}
		kind := "payment"
		switch reason, declined := s.opts.Declines[req.PaymentMethodID]; {
		case declined:
			p.Status = "canceled"
			p.CancellationDetails = &cancellation{Party: "payment_network", Reason: reason}
			kind = "payment_canceled"
		case s.opts.Pending:
			p.Status = "pending"
		case req.Capture != nil && !*req.Capture:
			p.Status = "waiting_for_capture"
			p.Paid = true
		default:
			p.Status, p.Paid, p.Refundable = "succeeded", true, true
		}
		s.payments[p.ID] = p
		s.order = append(s.order, p.ID)
		s.Record(r.Context(), key, kind, p.ID)
		return http.StatusOK, p, true
	})
}

func (s *Server) createRefund(w http.ResponseWriter, r *http.Request) {
	s.idempotent(w, r, func(key string, body []byte) (int, any, bool) {
		var req struct {
			PaymentID   string            `json:"payment_id"`
			Amount      amount            `json:"amount"`
			Description string            `json:"description"`
			Metadata    map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return invalid("", "Request body has fields of wrong types")
		}
		minor, bad := checkAmount(req.Amount)
		if bad != "" {
			return invalid(bad, "Invalid value of "+bad)
		}
		if !checkMetadata(req.Metadata) {
			return invalid("metadata", "Invalid metadata")
		}
		p, ok := s.payments[req.PaymentID]
		if !ok {
			return invalid("payment_id", "Payment not found")
		}
		if p.Status != "succeeded" || p.Amount.Currency != req.Amount.Currency || minor > p.minor-p.refunded {
			// Processed and refused: stored like any processed answer.
			return http.StatusBadRequest, errDoc{Type: "error", ID: newUUID(), Code: "invalid_request",
				Description: "Refund is not possible for this payment or amount", Parameter: "amount.value"}, true
		}
		now := s.Now().UTC()
		rf := &refund{
			ID: newUUID(), PaymentID: p.ID, Status: "succeeded", Amount: req.Amount, Description: req.Description,
			CreatedAt: now.Format("2006-01-02T15:04:05.000Z"), Metadata: req.Metadata, created: now,
		}
		p.refunded += minor
		s.refunds[rf.ID] = rf
		s.rorder = append(s.rorder, rf.ID)
		s.Record(r.Context(), key, "refund", rf.ID)
		return http.StatusOK, rf, true
	})
}

func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p, ok := s.payments[r.PathValue("id")]
	var out []byte
	if ok {
		out, _ = json.Marshal(p)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "Payment not found", "payment_id")
		return
	}
	writeRaw(w, out)
}

func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rf, ok := s.refunds[r.PathValue("id")]
	var out []byte
	if ok {
		out, _ = json.Marshal(rf)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "Refund not found", "refund_id")
		return
	}
	writeRaw(w, out)
}

func writeRaw(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// window is a created_at filter.
type window struct{ gte, gt, lte, lt time.Time }

func parseWindow(q map[string][]string) (window, string) {
	var win window
	for name, dst := range map[string]*time.Time{
		"created_at.gte": &win.gte, "created_at.gt": &win.gt, "created_at.lte": &win.lte, "created_at.lt": &win.lt,
	} {
		v := ""
		if vs := q[name]; len(vs) > 0 {
			v = vs[0]
		}
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return window{}, name
		}
		*dst = t
	}
	return win, ""
}

func (win window) match(t time.Time) bool {
	return (win.gte.IsZero() || !t.Before(win.gte)) && (win.gt.IsZero() || t.After(win.gt)) &&
		(win.lte.IsZero() || !t.After(win.lte)) && (win.lt.IsZero() || t.Before(win.lt))
}

// page reads limit and cursor: limit 1..100 (default 10). The cursor is
// opaque to clients; here it names the creation sequence number of the last
// object of the previous page, and the next page holds the matching objects
// created before it. A keyset cursor, as the real API's object-like cursor
// suggests: objects created while a client pages are never shifted onto a
// later page, so a scan sees each object at most once.
func page(q map[string][]string) (limit int, before int, bad string) {
	limit, before = 10, -1
	if vs := q["limit"]; len(vs) > 0 && vs[0] != "" {
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 || n > 100 {
			return 0, 0, "limit"
		}
		limit = n
	}
	if vs := q["cursor"]; len(vs) > 0 && vs[0] != "" {
		b, err := base64.RawURLEncoding.DecodeString(vs[0])
		if err != nil {
			return 0, 0, "cursor"
		}
		n, err := strconv.Atoi(strings.TrimPrefix(string(b), "seq:"))
		if err != nil || n < 0 || !strings.HasPrefix(string(b), "seq:") {
			return 0, 0, "cursor"
		}
		before = n
	}
	return limit, before, ""
}

// listNewestFirst walks the n objects of one kind, newest first, from just
// before the cursor position, and returns up to limit that match and the
// cursor of the next page ("" at the end).
func listNewestFirst(n, before, limit int, match func(i int) (any, bool)) ([]any, string) {
	start := n - 1
	if before >= 0 && before-1 < start {
		start = before - 1
	}
	items := []any{}
	last := -1
	for i := start; i >= 0; i-- {
		v, ok := match(i)
		if !ok {
			continue
		}
		if len(items) == limit {
			// Another one matches: the next page starts after the last taken.
			return items, base64.RawURLEncoding.EncodeToString([]byte("seq:" + strconv.Itoa(last)))
		}
		items = append(items, v)
		last = i
	}
	return items, ""
}

func writeList(w http.ResponseWriter, items []any, next string) {
	out := map[string]any{"type": "list", "items": items}
	if next != "" {
		out["next_cursor"] = next
	}
	sandbox.WriteJSON(w, http.StatusOK, "", out)
}

func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	win, bad := parseWindow(q)
	if bad == "" {
		if st := q.Get("status"); st != "" && st != "pending" && st != "waiting_for_capture" && st != "succeeded" && st != "canceled" {
			bad = "status"
		}
	}
	limit, before, badPage := page(q)
	if bad == "" {
		bad = badPage
	}
	if bad != "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "Invalid value of "+bad, bad)
		return
	}
	status := q.Get("status")
	s.mu.Lock()
	items, next := listNewestFirst(len(s.order), before, limit, func(i int) (any, bool) {
		p := s.payments[s.order[i]]
		if !win.match(p.created) || (status != "" && p.Status != status) {
			return nil, false
		}
		c := *p
		return &c, true
	})
	s.mu.Unlock()
	writeList(w, items, next)
}

func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	win, bad := parseWindow(q)
	limit, before, badPage := page(q)
	if bad == "" {
		bad = badPage
	}
	if bad != "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "Invalid value of "+bad, bad)
		return
	}
	pid := q.Get("payment_id")
	s.mu.Lock()
	items, next := listNewestFirst(len(s.rorder), before, limit, func(i int) (any, bool) {
		rf := s.refunds[s.rorder[i]]
		if !win.match(rf.created) || (pid != "" && rf.PaymentID != pid) {
			return nil, false
		}
		c := *rf
		return &c, true
	})
	s.mu.Unlock()
	writeList(w, items, next)
}

// canonicalHash is the hash of the body's JSON value with object keys
// sorted, so key order and spacing do not make a different request.
func canonicalHash(body []byte) (string, bool) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}

func parseMinor(s string) (int64, bool) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || len(s) > 18 || (dot && (len(frac) == 0 || len(frac) > 2)) || !digits(whole) || !digits(frac) {
		return 0, false
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 {
		return 0, false
	}
	for len(frac) < 2 {
		frac += "0"
	}
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return w*100 + f, true
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// Payments returns the ids of all payments in creation order (for tests).
func (s *Server) Payments() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
