package stripe

import (
	"net/http"
	"strings"

	"github.com/idemgate/idemgate/sandbox"
)

// The read side: a PaymentIntent by id, the Search API over metadata
// (visible only after SearchLag), and the refund list.

func (s *Server) getIntent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	pi, ok := s.intents[r.PathValue("id")]
	var view intent
	if ok {
		view = *pi
	}
	s.mu.Unlock()
	if !ok {
		writeErr(w, http.StatusNotFound, apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "intent", Message: "No such payment_intent."})
		return
	}
	writeObj(w, http.StatusOK, &view)
}

// parseQuery accepts the one clause the emulator supports:
// metadata['key']:'value' (single or double quotes, \ escapes).
func parseQuery(q string) (string, string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(q), "metadata[")
	if !ok {
		return "", "", false
	}
	name, rest, ok := quoted(rest)
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutPrefix(rest, "]:")
	if !ok {
		return "", "", false
	}
	value, rest, ok := quoted(rest)
	return name, value, ok && strings.TrimSpace(rest) == ""
}

func quoted(s string) (string, string, bool) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", "", false
	}
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == q:
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	name, value, ok := parseQuery(r.URL.Query().Get("query"))
	if !ok {
		writeErr(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "query", Message: "The search query is not supported by this sandbox (use metadata['key']:'value')."})
		return
	}
	limit, ok := sandbox.QueryLimit(r.URL.Query(), "limit", 10, 100)
	if !ok {
		writeErr(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "limit", Message: "Invalid limit."})
		return
	}
	offset := 0
	if v := r.URL.Query().Get("page"); v != "" {
		if offset, ok = sandbox.CursorPos(v); !ok {
			writeErr(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "page", Message: "Invalid page."})
			return
		}
	}
	now := s.Now()
	s.mu.Lock()
	var hits []any
	for i := len(s.order) - 1; i >= 0; i-- {
		pi := s.intents[s.order[i]]
		if pi.Metadata[name] == value && !pi.createdAt.Add(s.opts.SearchLag).After(now) {
			view := *pi
			hits = append(hits, &view)
		}
	}
	s.mu.Unlock()
	page, next := sandbox.Page(hits, offset, limit)
	out := map[string]any{"object": "search_result", "url": "/v1/payment_intents/search", "has_more": next >= 0, "data": page, "next_page": nil}
	if next >= 0 {
		out["next_page"] = sandbox.Cursor(next)
	}
	writeObj(w, http.StatusOK, out)
}

func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := sandbox.QueryLimit(q, "limit", 10, 100)
	if !ok {
		writeErr(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "limit", Message: "Invalid limit."})
		return
	}
	pid, after := q.Get("payment_intent"), q.Get("starting_after")
	s.mu.Lock()
	var items []any
	skipping := after != ""
	for i := len(s.refunds) - 1; i >= 0; i-- {
		rf := s.refunds[i]
		if pid != "" && rf.PaymentIntent != pid {
			continue
		}
		if skipping {
			skipping = rf.ID != after
			continue
		}
		view := *rf
		items = append(items, &view)
	}
	s.mu.Unlock()
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	writeObj(w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/refunds", "has_more": more, "data": append([]any{}, items...)})
}
