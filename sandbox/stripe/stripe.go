package stripe

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/sandbox"
)

// Name is the emulator's registry name.
const Name = "stripe"

// Defaults.
const (
	DefaultSecretKey = "sk_test_sandbox_0000000000000000"
	DefaultKeyTTL    = 24 * time.Hour
	DefaultSearchLag = 5 * time.Second
)

// Options configure the emulator.
type Options struct {
	sandbox.Options
	// SecretKey is the accepted API key.
	SecretKey string
	// KeyTTL is how long an Idempotency-Key is kept (24h).
	KeyTTL time.Duration
	// SearchLag is how long a new object stays invisible to the Search API
	// (default 5s; Stripe: "less than a minute"). Negative: no lag.
	SearchLag time.Duration
	// IgnoreKeys models a connector that always drops Idempotency-Key.
	IgnoreKeys bool
	// PaymentMethods are further accepted PaymentMethod ids (they succeed).
	PaymentMethods []string
	// BeforeExecute, when set, runs after the idempotency layer admitted a
	// POST and before it executes; a test can block in it to keep the
	// request in flight (409 idempotency_key_in_use for a concurrent one).
	BeforeExecute func(r *http.Request)
}

// WithDefaults fills zero fields.
func (o Options) WithDefaults() Options {
	o.Options = o.Options.WithDefaults()
	o.SecretKey = cmp.Or(o.SecretKey, DefaultSecretKey)
	if o.KeyTTL <= 0 {
		o.KeyTTL = DefaultKeyTTL
	}
	if o.SearchLag == 0 {
		o.SearchLag = DefaultSearchLag
	}
	if o.SearchLag < 0 {
		o.SearchLag = 0
	}
	return o
}

// decline is how the card network answers a test PaymentMethod.
type decline struct{ code, declineCode string }

var testMethods = map[string]*decline{
	"pm_card_visa": nil, "pm_card_mastercard": nil, "pm_card_amex": nil, "pm_card_visa_debit": nil,
	"pm_card_chargeDeclined":                  {"card_declined", "generic_decline"},
	"pm_card_chargeDeclinedInsufficientFunds": {"card_declined", "insufficient_funds"},
	"pm_card_chargeDeclinedExpiredCard":       {"expired_card", ""},
	"pm_card_authenticationRequired":          {"authentication_required", "authentication_required"},
}

// Server is the Stripe emulator.
type Server struct {
	*sandbox.Core
	opts Options

	mu      sync.Mutex
	intents map[string]*intent
	order   []string
	refunds []*refundObj
	keys    map[string]*stored
}

type intent struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Amount           int64             `json:"amount"`
	AmountReceived   int64             `json:"amount_received"`
	Currency         string            `json:"currency"`
	Status           string            `json:"status"`
	PaymentMethod    string            `json:"payment_method"`
	CaptureMethod    string            `json:"capture_method"`
	Created          int64             `json:"created"`
	Description      string            `json:"description,omitempty"`
	Livemode         bool              `json:"livemode"`
	Metadata         map[string]string `json:"metadata"`
	LastPaymentError *apiError         `json:"last_payment_error"`

	createdAt time.Time
	refunded  int64
}

type refundObj struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	PaymentIntent string            `json:"payment_intent"`
	Status        string            `json:"status"`
	Created       int64             `json:"created"`
	Metadata      map[string]string `json:"metadata"`
}

type apiError struct {
	Type          string  `json:"type"`
	Code          string  `json:"code,omitempty"`
	DeclineCode   string  `json:"decline_code,omitempty"`
	Message       string  `json:"message"`
	Param         string  `json:"param,omitempty"`
	PaymentIntent *intent `json:"payment_intent,omitempty"`
}

// stored is an idempotency key's record: in flight until done, then the
// answer to replay.
type stored struct {
	sandbox.Stored
	endpoint string
	done     bool
}

// New builds the emulator (not started).
func New(opts Options) *Server {
	s := &Server{opts: opts.WithDefaults()}
	s.resetState()
	s.Core = sandbox.NewCore(sandbox.Spec{Name: Name, WriteError: writeInjected, OnReset: s.resetState, Wrap: s.auth,
		Routes: map[string]http.HandlerFunc{
			"POST /v1/payment_intents": s.idempotent(s.createIntent), "POST /v1/refunds": s.idempotent(s.createRefund),
			"GET /v1/payment_intents/search": s.search, "GET /v1/payment_intents/{id}": s.getIntent, "GET /v1/refunds": s.listRefunds,
		},
		NotFound: func(w http.ResponseWriter, r *http.Request) {
			writeErr(w, http.StatusNotFound, apiError{Type: "invalid_request_error", Message: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + ")."})
		},
	}, s.opts.Options)
	return s
}

// SecretKey returns the accepted API key.
func (s *Server) SecretKey() string { return s.opts.SecretKey }

func (s *Server) resetState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intents = make(map[string]*intent)
	s.order = nil
	s.refunds = nil
	s.keys = make(map[string]*stored)
}

func writeInjected(w http.ResponseWriter, _ *http.Request, status int, _ time.Duration) {
	if status == http.StatusTooManyRequests {
		writeErr(w, status, apiError{Type: "invalid_request_error", Code: "rate_limit", Message: "Too many requests hit the API too quickly."})
		return
	}
	writeErr(w, status, apiError{Type: "api_error", Message: "An unknown error occurred."})
}

func writeErr(w http.ResponseWriter, status int, e apiError) {
	w.Header().Set("Request-Id", "req_"+randID(14))
	sandbox.WriteJSON(w, status, "", map[string]any{"error": e})
}

func writeObj(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Request-Id", "req_"+randID(14))
	sandbox.WriteJSON(w, status, "", v)
}

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, _, basic := r.BasicAuth() // the key as Basic user, or a Bearer token
		if !basic {
			key = sandbox.BearerToken(r)
		}
		if key == "" || !sandbox.SameSecret(key, s.opts.SecretKey) {
			writeErr(w, http.StatusUnauthorized, apiError{Type: "invalid_request_error", Message: "Invalid API Key provided."})
			return
		}
		next(w, r)
	}
}

// result is a handler's answer; keep marks answers of requests that began
// executing (stored under the key).
type result struct {
	status int
	body   any
	keep   bool
}

func invalidParam(param, msg, code string) result {
	return result{status: http.StatusBadRequest, body: map[string]any{"error": apiError{Type: "invalid_request_error", Code: code, Param: param, Message: msg}}}
}

// idempotent is Stripe's idempotency layer around a POST handler.
func (s *Server) idempotent(h func(r *http.Request, form url.Values, key string) result) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := sandbox.ReadBody(r, 1<<20)
		if err != nil {
			writeErr(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "Request body too large."})
			return
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			writeErr(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "Invalid form body."})
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if len(key) > 255 {
			writeErr(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "Idempotency-Key", Message: "Idempotency-Key must be at most 255 characters long."})
			return
		}
		use := key != "" && !s.opts.IgnoreKeys && !sandbox.KeyIgnored(r.Context())
		endpoint := r.Method + " " + r.URL.Path
		hash := formHash(form)
		if use {
			s.mu.Lock()
			st, ok := s.keys[key]
			if ok && !st.Fresh(s.Now(), s.opts.KeyTTL) {
				ok = false
			}
			switch {
			case ok && !st.done:
				s.mu.Unlock()
				writeErr(w, http.StatusConflict, apiError{Type: "idempotency_error", Code: "idempotency_key_in_use",
					Message: "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): " + key + ". Please try again later."})
				return
			case ok && (st.endpoint != endpoint || st.Hash != hash):
				s.mu.Unlock()
				writeErr(w, http.StatusBadRequest, apiError{Type: "idempotency_error",
					Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + key + "' if you meant to execute a different request."})
				return
			case ok:
				w.Header().Set("Idempotent-Replayed", "true")
				w.Header().Set("Original-Request", "req_replayed")
				answer := st.Stored
				s.mu.Unlock()
				w.Header().Set("Request-Id", "req_"+randID(14))
				answer.Replay(w)
				return
			}
			s.keys[key] = &stored{Stored: sandbox.Stored{Hash: hash, At: s.Now()}, endpoint: endpoint}
			s.mu.Unlock()
		}
		if s.opts.BeforeExecute != nil {
			s.opts.BeforeExecute(r)
		}
		res := h(r, form, key)
		out, err := json.Marshal(res.body)
		if err != nil {
			out = []byte(`{"error":{"type":"api_error","message":"encode"}}`)
			res.status, res.keep = http.StatusInternalServerError, true
		}
		if use {
			s.mu.Lock()
			if res.keep {
				s.keys[key] = &stored{Stored: sandbox.Stored{Hash: hash, Status: res.status, Body: out, At: s.Now()}, endpoint: endpoint, done: true}
			} else {
				delete(s.keys, key)
			}
			s.mu.Unlock()
		}
		w.Header().Set("Request-Id", "req_"+randID(14))
		sandbox.WriteBody(w, res.status, "", out)
	}
}

// formHash fingerprints the parameters, order-independent.
func formHash(form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		vs := append([]string(nil), form[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			h.Write([]byte(k + "=" + v + "\n"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// metadata reads metadata[k]=v parameters (≤ 50 keys, key ≤ 40, value ≤ 500).
func metadata(form url.Values) (map[string]string, bool) {
	m := map[string]string{}
	for k, vs := range form {
		name, ok := strings.CutPrefix(k, "metadata[")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, "]")
		if !ok || name == "" || len(name) > 40 || strings.ContainsAny(name, "[]") || len(vs) != 1 || len(vs[0]) > 500 {
			return nil, false
		}
		m[name] = vs[0]
	}
	return m, len(m) <= 50
}

func positiveInt(form url.Values, name string) (int64, bool) {
	n, err := strconv.ParseInt(form.Get(name), 10, 64)
	return n, err == nil && n > 0 && n <= 99999999
}

func (s *Server) createIntent(r *http.Request, form url.Values, key string) result {
	amount, ok := positiveInt(form, "amount")
	if !ok {
		return invalidParam("amount", "Invalid positive integer", "parameter_invalid_integer")
	}
	cur := form.Get("currency")
	if len(cur) != 3 || strings.ToLower(cur) != cur || !knownCurrency[cur] {
		return invalidParam("currency", "Invalid currency: "+cur+".", "parameter_invalid_string")
	}
	md, ok := metadata(form)
	if !ok {
		return invalidParam("metadata", "Invalid metadata.", "parameter_invalid_string")
	}
	pm := form.Get("payment_method")
	dec, known := testMethods[pm]
	if !known {
		for _, extra := range s.opts.PaymentMethods {
			known = known || extra == pm
		}
	}
	if pm == "" || !known {
		return invalidParam("payment_method", "No such PaymentMethod: '"+pm+"'", "resource_missing")
	}
	capture := form.Get("capture_method")
	if capture == "" {
		capture = "automatic"
	}
	now := s.Now()
	pi := &intent{
		ID: "pi_" + randID(24), Object: "payment_intent", Amount: amount, Currency: cur, PaymentMethod: pm,
		CaptureMethod: capture, Created: now.Unix(), Description: form.Get("description"), Metadata: md, createdAt: now,
		Status: "requires_confirmation",
	}
	kind := ""
	if form.Get("confirm") == "true" {
		switch {
		case dec != nil && dec.code == "authentication_required" && form.Get("off_session") != "true":
			pi.Status = "requires_action"
		case dec != nil:
			pi.Status = "requires_payment_method"
			pi.LastPaymentError = &apiError{Type: "card_error", Code: dec.code, DeclineCode: dec.declineCode, Message: "Your card was declined."}
			kind = "payment_intent_declined"
		case capture == "manual":
			pi.Status = "requires_capture"
			kind = "payment_intent"
		default:
			pi.Status, pi.AmountReceived = "succeeded", amount
			kind = "payment_intent"
		}
	}
	s.mu.Lock()
	s.intents[pi.ID] = pi
	s.order = append(s.order, pi.ID)
	view := *pi
	s.mu.Unlock()
	if kind != "" {
		s.Record(r.Context(), key, kind, pi.ID)
	}
	if pi.LastPaymentError != nil {
		e := *pi.LastPaymentError
		e.PaymentIntent = &view
		return result{status: http.StatusPaymentRequired, body: map[string]any{"error": e}, keep: true}
	}
	return result{status: http.StatusOK, body: &view, keep: true}
}

var knownCurrency = map[string]bool{"usd": true, "eur": true, "gbp": true, "rub": true, "jpy": true, "chf": true, "pln": true}

func (s *Server) createRefund(r *http.Request, form url.Values, key string) result {
	md, ok := metadata(form)
	if !ok {
		return invalidParam("metadata", "Invalid metadata.", "parameter_invalid_string")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.intents[form.Get("payment_intent")]
	if !ok {
		return invalidParam("payment_intent", "No such payment_intent: '"+form.Get("payment_intent")+"'", "resource_missing")
	}
	left := pi.AmountReceived - pi.refunded
	amount := left
	if form.Has("amount") {
		if amount, ok = positiveInt(form, "amount"); !ok {
			return invalidParam("amount", "Invalid positive integer", "parameter_invalid_integer")
		}
	}
	if pi.Status != "succeeded" || left == 0 {
		return result{status: http.StatusBadRequest, keep: true, body: map[string]any{"error": apiError{Type: "invalid_request_error",
			Code: "charge_already_refunded", Message: "This PaymentIntent has no charge left to refund."}}}
	}
	if amount > left {
		return result{status: http.StatusBadRequest, keep: true, body: map[string]any{"error": apiError{Type: "invalid_request_error",
			Param: "amount", Message: "Refund amount is greater than unrefunded amount on charge."}}}
	}
	pi.refunded += amount
	rf := &refundObj{ID: "re_" + randID(24), Object: "refund", Amount: amount, Currency: pi.Currency, PaymentIntent: pi.ID,
		Status: "succeeded", Created: s.Now().Unix(), Metadata: md}
	s.refunds = append(s.refunds, rf)
	s.Record(r.Context(), key, "refund", rf.ID)
	view := *rf
	return result{status: http.StatusOK, body: &view, keep: true}
}

func randID(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
