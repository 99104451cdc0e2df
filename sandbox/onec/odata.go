package onec

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/idemgate/idemgate/sandbox"
)

// The standard OData interface: the invoice entity set with the key in an
// extension attribute, creation by POST, and a $filter subset for lookups.

func odataError(w http.ResponseWriter, status int, code, msg string) {
	sandbox.WriteJSON(w, status, "", map[string]any{
		"odata.error": map[string]any{"code": code, "message": map[string]string{"lang": "ru", "value": msg}},
	})
}

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
	s.Record(r.Context(), sent, EffectInvoice, d.Ref)
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
