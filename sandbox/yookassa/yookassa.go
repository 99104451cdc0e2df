package yookassa

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

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
	o.ShopID = cmp.Or(o.ShopID, DefaultShopID)
	o.SecretKey = cmp.Or(o.SecretKey, DefaultSecretKey)
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
	order    []*payment // in creation order
	rorder   []*refund  // in creation order
	keys     map[string]*sandbox.Stored
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

// New builds the emulator (not started).
func New(opts Options) *Server {
	s := &Server{opts: opts.WithDefaults()}
	s.resetState()
	s.Core = sandbox.NewCore(sandbox.Spec{Name: Name, WriteError: writeInjected, OnReset: s.resetState, Wrap: s.auth,
		Routes: map[string]http.HandlerFunc{
			"POST /v3/payments": s.createPayment, "GET /v3/payments": s.listPayments, "GET /v3/payments/{id}": s.getPayment,
			"POST /v3/refunds": s.createRefund, "GET /v3/refunds": s.listRefunds, "GET /v3/refunds/{id}": s.getRefund,
		},
		NotFound: func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "not_found", "Resource not found", "")
		},
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

func (s *Server) resetState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.payments = make(map[string]*payment)
	s.refunds = make(map[string]*refund)
	s.order, s.rorder = nil, nil
	s.keys = make(map[string]*sandbox.Stored)
}

func writeInjected(w http.ResponseWriter, _ *http.Request, status int, _ time.Duration) {
	switch status {
	case http.StatusTooManyRequests:
		writeError(w, status, "too_many_requests", "Превышен лимит запросов в единицу времени", "")
	default:
		writeError(w, status, "internal_server_error", "Результат обработки запроса неизвестен", "")
	}
}

// writeError writes YooKassa's error document.
func writeError(w http.ResponseWriter, status int, code, description, parameter string) {
	body := map[string]string{"type": "error", "id": uuid.NewString(), "code": code, "description": description}
	if parameter != "" {
		body["parameter"] = parameter
	}
	sandbox.WriteJSON(w, status, "", body)
}

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sandbox.BasicAuthorized(r, s.opts.ShopID, s.opts.SecretKey) {
			writeError(w, http.StatusUnauthorized, "invalid_credentials", "Error in shopId or secret key. Check their validity.", "")
			return
		}
		next(w, r)
	}
}

// idempotent runs create under the key store: a replay returns the stored
// answer, a different body under the same key is refused, and only answers
// of requests that reached processing are stored.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, create func(key string, body []byte) answer) {
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
		if st, ok := s.keys[key]; ok && st.Fresh(now, s.opts.KeyTTL) {
			if st.Hash != hash {
				writeError(w, http.StatusBadRequest, "invalid_request", "Idempotence key duplicated", "Idempotence-Key")
				return
			}
			st.Replay(w)
			return
		}
	}
	a := create(key, body)
	out, err := json.Marshal(a.body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal_server_error", "encode", "")
		return
	}
	if a.keep && !ignored {
		s.keys[key] = &sandbox.Stored{Hash: hash, Status: a.status, Body: out, At: now}
	}
	sandbox.WriteBody(w, a.status, "", out)
}

type errDoc struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Code        string `json:"code"`
	Description string `json:"description"`
	Parameter   string `json:"parameter,omitempty"`
}

// answer is a create's answer; keep marks the answers of requests that
// reached processing, stored under the key.
type answer struct {
	status int
	body   any
	keep   bool
}

func invalid(param, desc string) answer {
	return answer{http.StatusBadRequest, errDoc{Type: "error", ID: uuid.NewString(), Code: "invalid_request", Description: desc, Parameter: param}, false}
}

// createFields are what both create requests carry.
type createFields struct {
	Amount      amount            `json:"amount"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
}

// decodeCreate reads a create request into req, which embeds f, and makes
// the checks both creates begin with: field types, then the amount. A
// refusal is the answer to give.
func decodeCreate(body []byte, req any, f *createFields) (minor int64, refusal *answer) {
	if err := json.Unmarshal(body, req); err != nil {
		a := invalid("", "Request body has fields of wrong types")
		return 0, &a
	}
	minor, bad := checkAmount(f.Amount)
	if bad != "" {
		a := invalid(bad, "Invalid value of "+bad)
		return 0, &a
	}
	return minor, nil
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
	s.idempotent(w, r, func(key string, body []byte) answer {
		var req struct {
			createFields
			Capture         *bool  `json:"capture"`
			PaymentMethodID string `json:"payment_method_id"`
		}
		minor, refusal := decodeCreate(body, &req, &req.createFields)
		if refusal != nil {
			return *refusal
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
		now := s.Now().UTC().Truncate(time.Millisecond) // created_at carries milliseconds
		p := &payment{
			ID: uuid.NewString(), Amount: req.Amount, Description: req.Description,
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
		s.order = append(s.order, p)
		s.Record(r.Context(), key, kind, p.ID)
		return answer{http.StatusOK, p, true}
	})
}

func (s *Server) createRefund(w http.ResponseWriter, r *http.Request) {
	s.idempotent(w, r, func(key string, body []byte) answer {
		var req struct {
			createFields
			PaymentID string `json:"payment_id"`
		}
		minor, refusal := decodeCreate(body, &req, &req.createFields)
		if refusal != nil {
			return *refusal
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
			return answer{http.StatusBadRequest, errDoc{Type: "error", ID: uuid.NewString(), Code: "invalid_request",
				Description: "Refund is not possible for this payment or amount", Parameter: "amount.value"}, true}
		}
		now := s.Now().UTC().Truncate(time.Millisecond)
		rf := &refund{
			ID: uuid.NewString(), PaymentID: p.ID, Status: "succeeded", Amount: req.Amount, Description: req.Description,
			CreatedAt: now.Format("2006-01-02T15:04:05.000Z"), Metadata: req.Metadata, created: now,
		}
		p.refunded += minor
		s.refunds[rf.ID] = rf
		s.rorder = append(s.rorder, rf)
		s.Record(r.Context(), key, "refund", rf.ID)
		return answer{http.StatusOK, rf, true}
	})
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

// Payments returns the ids of all payments in creation order (for tests).
func (s *Server) Payments() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, len(s.order))
	for i, p := range s.order {
		ids[i] = p.ID
	}
	return ids
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
