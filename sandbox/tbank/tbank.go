package tbank

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/sandbox"
)

// Name is the emulator's registry name.
const Name = "tbank"

// RebillIds the emulator declines by default.
const (
	RebillInsufficientFunds = "9000001051"
	RebillDeclined          = "9000001001"
)

// Error codes the emulator answers (T-Bank's published table, [3P]).
const (
	CodeOK            = "0"
	CodeBadStatus     = "8"
	CodeBadToken      = "204"
	CodeInvalidParams = "9999"
)

// Defaults.
const (
	DefaultTerminalKey   = "TestTerminalDEMO"
	DefaultPassword      = "sandbox_terminal_password"
	DefaultMaxOrderIDLen = 36
)

// Options configure the emulator.
type Options struct {
	sandbox.Options
	// TerminalKey and Password are the accepted terminal credentials.
	TerminalKey string
	Password    string
	// DuplicateOrderIDs makes Init accept an OrderId it has seen.
	DuplicateOrderIDs bool
	// MaxOrderIDLen is the longest OrderId accepted (36).
	MaxOrderIDLen int
	// Declines maps RebillIds to the ErrorCode a Charge is rejected with.
	// Nil: RebillInsufficientFunds → "1051", RebillDeclined → "1001".
	Declines map[string]string
}

// WithDefaults fills zero fields.
func (o Options) WithDefaults() Options {
	o.Options = o.Options.WithDefaults()
	o.TerminalKey = cmp.Or(o.TerminalKey, DefaultTerminalKey)
	o.Password = cmp.Or(o.Password, DefaultPassword)
	if o.MaxOrderIDLen <= 0 {
		o.MaxOrderIDLen = DefaultMaxOrderIDLen
	}
	if o.Declines == nil {
		o.Declines = map[string]string{RebillInsufficientFunds: "1051", RebillDeclined: "1001"}
	}
	return o
}

// Server is the T-Bank emulator.
type Server struct {
	*sandbox.Core
	opts Options

	mu       sync.Mutex
	nextID   int64
	payments map[string]*payment   // by PaymentId
	orders   map[string][]*payment // by OrderId, creation order
	cancels  map[string]bool       // PaymentId + "/" + ExternalRequestId
}

type payment struct {
	id        string
	orderID   string
	amount    int64
	refunded  int64
	status    string
	errorCode string
	created   time.Time
}

// New builds the emulator (not started).
func New(opts Options) *Server {
	s := &Server{opts: opts.WithDefaults()}
	s.resetState()
	s.Core = sandbox.NewCore(sandbox.Spec{Name: Name, Classify: classify, WriteError: writeInjected, OnReset: s.resetState,
		Routes: map[string]http.HandlerFunc{
			"POST /v2/Init": s.signed(s.initPayment), "POST /v2/Charge": s.signed(s.charge), "POST /v2/Cancel": s.signed(s.cancel),
			"POST /v2/CheckOrder": s.signed(s.checkOrder), "POST /v2/GetState": s.signed(s.getState),
		},
		NotFound: func(w http.ResponseWriter, r *http.Request) {
			sandbox.WriteJSON(w, http.StatusNotFound, "", failure(CodeInvalidParams, "Метод не найден", ""))
		},
	}, s.opts.Options)
	return s
}

// Credentials returns the accepted TerminalKey and Password.
func (s *Server) Credentials() (terminalKey, password string) {
	return s.opts.TerminalKey, s.opts.Password
}

func classify(r *http.Request) sandbox.Scope {
	switch r.URL.Path {
	case "/v2/Charge", "/v2/Cancel":
		return sandbox.ScopeCreate
	}
	return sandbox.ScopeRead
}

func (s *Server) resetState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID = 4000000000
	s.payments = make(map[string]*payment)
	s.orders = make(map[string][]*payment)
	s.cancels = make(map[string]bool)
}

func writeInjected(w http.ResponseWriter, _ *http.Request, status int, _ time.Duration) {
	sandbox.WriteJSON(w, status, "", failure(CodeInvalidParams, "Внутренняя ошибка сервера", ""))
}

func failure(code, msg, details string) map[string]any {
	return map[string]any{"Success": false, "ErrorCode": code, "Message": msg, "Details": details}
}

// Sign computes the request Token: the values of the root-level scalar
// parameters (Token excluded) plus {"Password": password}, sorted by key,
// concatenated, SHA-256, lowercase hex. Numbers keep their JSON text,
// booleans are "true"/"false", strings their unquoted value; objects,
// arrays and nulls are left out.
func Sign(params map[string]json.RawMessage, password string) string {
	vals := map[string]string{"Password": password}
	for k, raw := range params {
		if k == "Token" {
			continue
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] == '{' || raw[0] == '[' || string(raw) == "null" {
			continue
		}
		if raw[0] == '"' {
			var str string
			if json.Unmarshal(raw, &str) != nil {
				continue
			}
			vals[k] = str
			continue
		}
		vals[k] = string(raw)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(vals[k])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

type request struct {
	params map[string]json.RawMessage
}

func (q request) str(k string) string {
	var s string
	if raw, ok := q.params[k]; ok {
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
	}
	return s
}

// id reads an identifier sent as a string or as a JSON number (PaymentId,
// RebillId).
func (q request) id(k string) string {
	if s := q.str(k); s != "" {
		return s
	}
	if n, ok := q.int(k); ok {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// int reads an integer parameter sent as a JSON number or numeric string.
func (q request) int(k string) (int64, bool) {
	raw, ok := q.params[k]
	if !ok {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if v, err := n.Int64(); err == nil {
			return v, true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v, true
		}
	}
	return 0, false
}

// signed parses the body and checks TerminalKey and Token before the method
// handler runs.
func (s *Server) signed(next func(http.ResponseWriter, *http.Request, request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := sandbox.ReadBody(r, 1<<20)
		if err != nil {
			sandbox.WriteJSON(w, http.StatusOK, "", failure(CodeInvalidParams, "Неверные параметры.", "Тело запроса слишком велико."))
			return
		}
		var params map[string]json.RawMessage
		if err := json.Unmarshal(body, &params); err != nil || params == nil {
			sandbox.WriteJSON(w, http.StatusOK, "", failure(CodeInvalidParams, "Неверные параметры.", "Тело запроса не является JSON-объектом."))
			return
		}
		q := request{params: params}
		token := q.str("Token")
		want := Sign(params, s.opts.Password)
		if q.str("TerminalKey") != s.opts.TerminalKey || !sandbox.SameSecret(token, want) {
			sandbox.WriteJSON(w, http.StatusOK, "", failure(CodeBadToken, "Неверный токен. Проверьте пару TerminalKey/SecretKey.", ""))
			return
		}
		next(w, r, q)
	}
}

// payment returns the payment with id, or answers that there is none. The
// caller holds s.mu.
func (s *Server) payment(w http.ResponseWriter, id string) *payment {
	p, ok := s.payments[id]
	if !ok {
		invalid(w, "Платёж не найден.")
	}
	return p
}

func invalid(w http.ResponseWriter, details string) {
	sandbox.WriteJSON(w, http.StatusOK, "", failure(CodeInvalidParams, "Неверные параметры.", details))
}

func (s *Server) initPayment(w http.ResponseWriter, r *http.Request, q request) {
	amount, ok := q.int("Amount")
	if !ok || amount <= 0 {
		invalid(w, "Поле Amount должно быть положительным целым числом.")
		return
	}
	orderID := q.str("OrderId")
	if orderID == "" || utf8.RuneCountInString(orderID) > s.opts.MaxOrderIDLen {
		invalid(w, "Поле OrderId не должно быть пустым и длиннее 36 символов.")
		return
	}
	if utf8.RuneCountInString(q.str("Description")) > 140 {
		invalid(w, "Поле Description слишком длинное.")
		return
	}
	if raw, ok := q.params["DATA"]; ok && !validData(raw) {
		invalid(w, "Поле DATA: не более 20 пар, ключ до 20, значение до 100 символов.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.orders[orderID]) > 0 && !s.opts.DuplicateOrderIDs && !sandbox.KeyIgnored(r.Context()) {
		sandbox.WriteJSON(w, http.StatusOK, "", failure(CodeBadStatus, "Неверный статус транзакции.", ""))
		return
	}
	s.nextID++
	p := &payment{id: strconv.FormatInt(s.nextID, 10), orderID: orderID, amount: amount, status: "NEW", created: s.Now()}
	s.payments[p.id] = p
	s.orders[orderID] = append(s.orders[orderID], p)
	sandbox.WriteJSON(w, http.StatusOK, "", map[string]any{
		"Success": true, "ErrorCode": CodeOK, "TerminalKey": s.opts.TerminalKey, "Status": p.status,
		"PaymentId": p.id, "OrderId": orderID, "Amount": amount,
		"PaymentURL": "https://securepayments.tinkoff.ru/sandbox/" + p.id,
	})
}

func validData(raw json.RawMessage) bool {
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil || len(m) > 20 {
		return false
	}
	for k, v := range m {
		if utf8.RuneCountInString(k) > 20 || utf8.RuneCountInString(v) > 100 {
			return false
		}
	}
	return true
}

func (s *Server) charge(w http.ResponseWriter, r *http.Request, q request) {
	pid, rebill := q.id("PaymentId"), q.id("RebillId")
	if pid == "" || rebill == "" {
		invalid(w, "Поля PaymentId и RebillId обязательны.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.payment(w, pid)
	if p == nil {
		return
	}
	if p.status != "NEW" {
		sandbox.WriteJSON(w, http.StatusOK, "", failure(CodeBadStatus, "Неверный статус транзакции.", ""))
		return
	}
	if code, declined := s.opts.Declines[rebill]; declined {
		p.status, p.errorCode = "REJECTED", code
		s.Record(r.Context(), p.orderID, "charge_rejected", p.id)
		out := s.state(p)
		out["Success"], out["ErrorCode"], out["Message"] = false, code, "Операция отклонена."
		sandbox.WriteJSON(w, http.StatusOK, "", out)
		return
	}
	p.status = "CONFIRMED"
	s.Record(r.Context(), p.orderID, "charge", p.id)
	sandbox.WriteJSON(w, http.StatusOK, "", s.state(p))
}

func (s *Server) state(p *payment) map[string]any {
	return map[string]any{
		"Success": true, "ErrorCode": CodeOK, "TerminalKey": s.opts.TerminalKey, "Status": p.status,
		"PaymentId": p.id, "OrderId": p.orderID, "Amount": p.amount,
	}
}

func (s *Server) checkOrder(w http.ResponseWriter, _ *http.Request, q request) {
	orderID := q.str("OrderId")
	if orderID == "" {
		invalid(w, "Поле OrderId не должно быть пустым.")
		return
	}
	s.mu.Lock()
	payments := make([]map[string]any, 0, len(s.orders[orderID]))
	for _, p := range s.orders[orderID] {
		code, ok := p.errorCode, p.status != "REJECTED"
		if code == "" {
			code = CodeOK
		}
		payments = append(payments, map[string]any{
			"PaymentId": p.id, "Amount": p.amount, "Status": p.status, "RRN": "",
			"Success": ok, "ErrorCode": code, "Message": "",
		})
	}
	s.mu.Unlock()
	sandbox.WriteJSON(w, http.StatusOK, "", map[string]any{
		"Success": true, "ErrorCode": CodeOK, "Message": "OK", "OrderId": orderID, "Payments": payments,
	})
}

func (s *Server) getState(w http.ResponseWriter, _ *http.Request, q request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.payment(w, q.id("PaymentId"))
	if p == nil {
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, "", s.state(p))
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, q request) {
	pid, ext := q.id("PaymentId"), q.str("ExternalRequestId")
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.payment(w, pid)
	if p == nil {
		return
	}
	ignored := sandbox.KeyIgnored(r.Context())
	reply := func(original int64) {
		out := map[string]any{
			"Success": true, "ErrorCode": CodeOK, "TerminalKey": s.opts.TerminalKey, "Status": p.status,
			"PaymentId": p.id, "OrderId": p.orderID, "OriginalAmount": original, "NewAmount": p.amount - p.refunded,
		}
		if ext != "" {
			out["ExternalRequestId"] = ext
		}
		sandbox.WriteJSON(w, http.StatusOK, "", out)
	}
	if ext != "" && !ignored && s.cancels[pid+"/"+ext] {
		reply(p.amount - p.refunded)
		return
	}
	if p.status != "CONFIRMED" && p.status != "PARTIAL_REFUNDED" {
		sandbox.WriteJSON(w, http.StatusOK, "", failure(CodeBadStatus, "Неверный статус транзакции.", ""))
		return
	}
	left := p.amount - p.refunded
	amount, has := q.int("Amount")
	if !has {
		amount = left
	}
	if amount <= 0 || amount > left {
		invalid(w, "Сумма возврата больше остатка.")
		return
	}
	p.refunded += amount
	p.status = "PARTIAL_REFUNDED"
	if p.refunded == p.amount {
		p.status = "REFUNDED"
	}
	if ext != "" && !ignored {
		s.cancels[pid+"/"+ext] = true
	}
	key := ext
	if key == "" {
		key = pid
	}
	s.Record(r.Context(), key, "refund", p.id)
	reply(left)
}
