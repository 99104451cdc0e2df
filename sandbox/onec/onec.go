package onec

import (
	"crypto/sha256"
	"crypto/subtle"
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
	if o.User == "" {
		o.User = DefaultUser
	}
	if o.Password == "" {
		o.Password = DefaultPassword
	}
	if o.Document == "" {
		o.Document = DefaultDocument
	}
	if o.KeyAttribute == "" {
		o.KeyAttribute = DefaultKeyAttribute
	}
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
	keyLocks map[string]*sync.Mutex
}

// New builds the emulator.
func New(opts Options) *Server {
	s := &Server{opts: opts.WithDefaults()}
	s.resetState()
	mux := http.NewServeMux()
	svc := s.opts.BasePath + "/hs/integration/invoices"
	mux.HandleFunc("POST "+svc, s.auth(s.createInvoice))
	mux.HandleFunc("GET "+svc+"/{key}", s.auth(s.getInvoice))
	od := s.opts.BasePath + "/odata/standard.odata/"
	mux.HandleFunc("POST "+od+"{set}", s.auth(s.odataCreate))
	mux.HandleFunc("GET "+od+"{set}", s.auth(s.odataList))
	s.Core = sandbox.NewCore(sandbox.Spec{
		Name:       "onec",
		Handler:    mux,
		Classify:   classify,
		WriteError: s.writeInjected,
		OnReset:    s.resetState,
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

func classify(r *http.Request) sandbox.Scope {
	if r.Method == http.MethodPost {
		return sandbox.ScopeCreate
	}
	return sandbox.ScopeRead
}

func (s *Server) resetState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs = nil
	s.register = make(map[string]*document)
	s.keyLocks = make(map[string]*sync.Mutex)
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.opts.User)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(s.opts.Password)) != 1 {
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
func (s *Server) writeInjected(w http.ResponseWriter, r *http.Request, status int, retryAfter time.Duration) {
	sandbox.SetRetryAfter(w, retryAfter)
	if isOData(r) {
		odataError(w, status, "-1", "Ошибка при выполнении операции над данными")
		return
	}
	switch status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		sandbox.WriteJSON(w, status, "", map[string]any{"error": "lock_timeout", "retry_after": secs})
	default:
		sandbox.WriteJSON(w, status, "", map[string]string{"error": "internal"})
	}
}

func odataError(w http.ResponseWriter, status int, code, msg string) {
	sandbox.WriteJSON(w, status, "", map[string]any{
		"odata.error": map[string]any{"code": code, "message": map[string]string{"lang": "ru", "value": msg}},
	})
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
	s.Record(r.Context(), sent, "invoice", d.Ref)
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
	return d
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
		for _, doc := range s.docs {
			if strings.Contains(doc.Comment, "[op:"+key+"]") && !doc.Deleted {
				d, by = doc, "marker"
				break
			}
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

// --- OData ---

func (s *Server) entity(d *document, sel []string) map[string]any {
	e := map[string]any{
		"Ref_Key":           d.Ref,
		"DataVersion":       fmt.Sprintf("AAAAAAAA%03d=", d.Version),
		"DeletionMark":      d.Deleted,
		"Number":            d.Number,
		"Date":              d.Date.Format("2006-01-02T15:04:05"),
		"Posted":            d.Posted,
		s.opts.KeyAttribute: d.Key,
		"НомерЗаказа":       d.OrderID,
		"КодКонтрагента":    d.CustomerID,
		"СуммаДокумента":    json.Number(formatMinor(d.AmountMinor)),
		"ВалютаДокумента":   d.Currency,
		"СрокОплаты":        d.DueDate,
		"Комментарий":       d.Comment,
	}
	if len(sel) > 0 {
		out := make(map[string]any, len(sel))
		for _, k := range sel {
			if v, ok := e[k]; ok {
				out[k] = v
			}
		}
		return out
	}
	return e
}

func formatMinor(m int64) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return fmt.Sprintf("%s%d.%02d", sign, m/100, m%100)
}

func (s *Server) metadataURL() string {
	return s.URL() + s.opts.BasePath + "/odata/standard.odata/$metadata#" + s.opts.Document
}

func (s *Server) odataCreate(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("set") != s.opts.Document {
		odataError(w, http.StatusNotFound, "-1", "Не найден сегмент URL "+strconv.Quote(r.PathValue("set")))
		return
	}
	body, err := sandbox.ReadBody(r, 1<<20)
	if err != nil {
		odataError(w, http.StatusBadRequest, "-1", "Тело запроса слишком велико")
		return
	}
	var e map[string]json.RawMessage
	if err := json.Unmarshal(body, &e); err != nil {
		odataError(w, http.StatusBadRequest, "-1", "Ошибка разбора JSON")
		return
	}
	str := func(k string) string {
		var v string
		_ = json.Unmarshal(e[k], &v)
		return v
	}
	for _, ro := range []string{"Ref_Key", "Posted", "DataVersion"} {
		if _, ok := e[ro]; ok {
			odataError(w, http.StatusBadRequest, "-1", "Свойство "+ro+" только для чтения")
			return
		}
	}
	var amount json.Number
	if err := json.Unmarshal(e["СуммаДокумента"], &amount); err != nil {
		odataError(w, http.StatusBadRequest, "-1", "Неверное значение свойства СуммаДокумента")
		return
	}
	minor, ok := parseMinor(string(amount))
	if !ok {
		odataError(w, http.StatusBadRequest, "-1", "Неверное значение свойства СуммаДокумента")
		return
	}
	if str("Date") == "" {
		odataError(w, http.StatusBadRequest, "-1", "Не заполнено свойство Date")
		return
	}
	q := invoiceRequest{OrderID: str("НомерЗаказа"), CustomerID: str("КодКонтрагента"), AmountMinor: minor,
		Currency: str("ВалютаДокумента"), DueDate: str("СрокОплаты"), Description: str("Комментарий")}
	if msg := q.validate(); msg != "" {
		// A failing ОбработкаЗаполнения/ОбработкаПроверкиЗаполнения: 1C says -1 and 500.
		odataError(w, http.StatusInternalServerError, "-1", "Ошибка при выполнении обработчика - 'ОбработкаПроверкиЗаполнения': "+msg)
		return
	}
	sent := str(s.opts.KeyAttribute)
	key := sent
	if sandbox.KeyIgnored(r.Context()) {
		key = ""
	}
	d := s.newDocument(key, q)
	s.Record(r.Context(), sent, "invoice", d.Ref)
	ent := s.entity(d, nil)
	ent["odata.metadata"] = s.metadataURL() + "/@Element"
	sandbox.WriteJSON(w, http.StatusCreated, "application/json;odata=minimalmetadata", ent)
}

func parseMinor(s string) (int64, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 || whole == "" {
		return 0, false
	}
	for len(frac) < 2 {
		frac += "0"
	}
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	return n, err == nil
}

func (s *Server) odataList(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("set") != s.opts.Document {
		odataError(w, http.StatusNotFound, "-1", "Не найден сегмент URL "+strconv.Quote(r.PathValue("set")))
		return
	}
	q := r.URL.Query()
	if q.Get("$format") != "json" && !strings.Contains(r.Header.Get("Accept"), "json") {
		odataError(w, http.StatusNotAcceptable, "-1", "Эмулятор отвечает только в JSON ($format=json)")
		return
	}
	conds, err := parseFilter(q.Get("$filter"))
	if err != nil {
		odataError(w, http.StatusBadRequest, "-1", "Неверный $filter: "+err.Error())
		return
	}
	top := -1
	if t := q.Get("$top"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			odataError(w, http.StatusBadRequest, "-1", "Неверный $top")
			return
		}
		top = n
	}
	var sel []string
	if v := q.Get("$select"); v != "" {
		sel = strings.Split(v, ",")
	}
	s.mu.Lock()
	docs := append([]*document(nil), s.docs...)
	s.mu.Unlock()
	values := []map[string]any{}
	for _, d := range docs {
		full := s.entity(d, nil)
		if !matchAll(full, conds) {
			continue
		}
		if top >= 0 && len(values) >= top {
			break
		}
		values = append(values, s.entity(d, sel))
	}
	sandbox.WriteJSON(w, http.StatusOK, "application/json;odata=minimalmetadata", map[string]any{
		"odata.metadata": s.metadataURL(), "value": values,
	})
}

// cond is one "<name> eq <literal>" clause, or with contains set one
// "substringof('<text>', <name>)" clause.
type cond struct {
	name     string
	val      any
	contains bool
}

// parseFilter parses the $filter subset: clauses "<name> eq <literal>" and
// "substringof('<text>', <name>)" (optionally "eq true") joined by " and ";
// literals 'string' (with ” escapes), guid'…', true, false, numbers.
func parseFilter(f string) ([]cond, error) {
	f = strings.TrimSpace(f)
	if f == "" {
		return nil, nil
	}
	var out []cond
	for f != "" {
		var rest string
		if after, ok := strings.CutPrefix(f, "substringof("); ok {
			lit, tail, err := parseLiteral(strings.TrimLeft(after, " "))
			text, isText := lit.(string)
			if err != nil || !isText {
				return nil, fmt.Errorf("substringof ожидает строку")
			}
			tail, ok = strings.CutPrefix(strings.TrimLeft(tail, " "), ",")
			name, tail2, ok2 := strings.Cut(tail, ")")
			name = strings.TrimSpace(name)
			if !ok || !ok2 || name == "" || strings.ContainsAny(name, " '()") {
				return nil, fmt.Errorf("ожидалось substringof('<текст>', <имя>)")
			}
			rest = strings.TrimLeft(tail2, " ")
			rest = strings.TrimPrefix(rest, "eq true")
			out = append(out, cond{name: name, val: text, contains: true})
		} else {
			name, r, ok := strings.Cut(f, " eq ")
			name = strings.TrimSpace(name)
			if !ok || name == "" || strings.ContainsAny(name, " '()") {
				return nil, fmt.Errorf("ожидалось <имя> eq <значение>")
			}
			val, r, err := parseLiteral(strings.TrimLeft(r, " "))
			if err != nil {
				return nil, err
			}
			rest = r
			out = append(out, cond{name: name, val: val})
		}
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			break
		}
		after, ok := strings.CutPrefix(rest, "and ")
		if !ok {
			return nil, fmt.Errorf("поддерживается только and")
		}
		f = strings.TrimLeft(after, " ")
		if f == "" {
			return nil, fmt.Errorf("пустое условие после and")
		}
	}
	return out, nil
}

func parseLiteral(s string) (any, string, error) {
	switch {
	case strings.HasPrefix(s, "guid'"):
		end := strings.IndexByte(s[5:], '\'')
		if end < 0 {
			return nil, "", fmt.Errorf("незакрытый guid")
		}
		g := s[5 : 5+end]
		if _, err := uuid.Parse(g); err != nil {
			return nil, "", fmt.Errorf("неверный guid")
		}
		return strings.ToLower(g), s[5+end+1:], nil
	case strings.HasPrefix(s, "'"):
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				return b.String(), s[i+1:], nil
			}
			b.WriteByte(s[i])
		}
		return nil, "", fmt.Errorf("незакрытая строка")
	case strings.HasPrefix(s, "true"):
		return true, s[4:], nil
	case strings.HasPrefix(s, "false"):
		return false, s[5:], nil
	}
	end := strings.IndexByte(s, ' ')
	if end < 0 {
		end = len(s)
	}
	if _, err := strconv.ParseFloat(s[:end], 64); err != nil {
		return nil, "", fmt.Errorf("неизвестный литерал")
	}
	return json.Number(s[:end]), s[end:], nil
}

func matchAll(e map[string]any, conds []cond) bool {
	for _, c := range conds {
		v, ok := e[c.name]
		if !ok {
			return false
		}
		if c.contains {
			if !strings.Contains(fmt.Sprint(v), c.val.(string)) {
				return false
			}
			continue
		}
		switch want := c.val.(type) {
		case json.Number:
			got, ok := v.(json.Number)
			if !ok {
				return false
			}
			a, _ := strconv.ParseFloat(string(got), 64)
			b, _ := strconv.ParseFloat(string(want), 64)
			if a != b {
				return false
			}
		default:
			if fmt.Sprint(v) != fmt.Sprint(want) {
				return false
			}
		}
	}
	return true
}
