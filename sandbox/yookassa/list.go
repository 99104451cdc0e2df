package yookassa

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/idemgate/idemgate/sandbox"
)

// The read side: one object by id, and the payment and refund lists,
// newest first, filtered by creation time and paged by a keyset cursor.

func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	s.getOne(w, "Payment not found", "payment_id", func() (any, bool) {
		p, ok := s.payments[r.PathValue("id")]
		return p, ok
	})
}

func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	s.getOne(w, "Refund not found", "refund_id", func() (any, bool) {
		rf, ok := s.refunds[r.PathValue("id")]
		return rf, ok
	})
}

// getOne answers with the object find returns (under the lock), or
// YooKassa's not_found naming param.
func (s *Server) getOne(w http.ResponseWriter, notFound, param string, find func() (any, bool)) {
	s.mu.Lock()
	o, ok := find()
	var out []byte
	if ok {
		out, _ = json.Marshal(o)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", notFound, param)
		return
	}
	sandbox.WriteBody(w, http.StatusOK, "", out)
}

// listable is an object a list serves.
type listable interface {
	listedAt() time.Time
	// listedBy is the value the list's filter parameter is compared with.
	listedBy() string
	// snapshot is a copy to encode after the lock is released.
	snapshot() any
}

func (p *payment) listedAt() time.Time { return p.created }
func (p *payment) listedBy() string    { return p.Status }
func (p *payment) snapshot() any {
	c := *p
	return &c
}

func (rf *refund) listedAt() time.Time { return rf.created }
func (rf *refund) listedBy() string    { return rf.PaymentID }
func (rf *refund) snapshot() any {
	c := *rf
	return &c
}

var paymentStatuses = map[string]bool{"pending": true, "waiting_for_capture": true, "succeeded": true, "canceled": true}

func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, "status", func(v string) bool { return paymentStatuses[v] }, func() []*payment { return s.order })
}

func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, "payment_id", nil, func() []*refund { return s.rorder })
}

// serveList answers a list request: the objects (in creation order, read
// under the lock) inside the created_at window whose listedBy equals the
// filter parameter when it is given (valid, when set, refuses other
// values), newest first, a page at a time.
func serveList[T listable](s *Server, w http.ResponseWriter, r *http.Request, filter string, valid func(string) bool, objects func() []T) {
	q := r.URL.Query()
	win, bad := parseWindow(q)
	want := q.Get(filter)
	if bad == "" && want != "" && valid != nil && !valid(want) {
		bad = filter
	}
	limit, before, badPage := page(q)
	if bad == "" {
		bad = badPage
	}
	if bad != "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "Invalid value of "+bad, bad)
		return
	}
	s.mu.Lock()
	items, next := listNewestFirst(objects(), before, limit, func(o T) bool {
		return win.match(o.listedAt()) && (want == "" || o.listedBy() == want)
	}, func(o T) bool { return win.older(o.listedAt()) })
	s.mu.Unlock()
	out := map[string]any{"type": "list", "items": items}
	if next != "" {
		out["next_cursor"] = next
	}
	sandbox.WriteJSON(w, http.StatusOK, "", out)
}

// window is a created_at filter.
type window struct{ gte, gt, lte, lt time.Time }

func parseWindow(q url.Values) (window, string) {
	var win window
	for name, dst := range map[string]*time.Time{
		"created_at.gte": &win.gte, "created_at.gt": &win.gt, "created_at.lte": &win.lte, "created_at.lt": &win.lt,
	} {
		v := q.Get(name)
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

// older reports whether t is before the window's lower bound: objects
// created earlier (all that follow, newest first) cannot match either.
func (win window) older(t time.Time) bool {
	return (!win.gte.IsZero() && t.Before(win.gte)) || (!win.gt.IsZero() && !t.After(win.gt))
}

// page reads limit and cursor: limit 1..100 (default 10). The cursor is
// opaque to clients; here it names the creation sequence number of the last
// object of the previous page, and the next page holds the matching objects
// created before it. A keyset cursor, as the real API's object-like cursor
// suggests: objects created while a client pages are never shifted onto a
// later page, so a scan sees each object at most once.
func page(q url.Values) (limit int, before int, bad string) {
	limit, ok := sandbox.QueryLimit(q, "limit", 10, 100)
	if !ok {
		return 0, 0, "limit"
	}
	before = -1
	if c := q.Get("cursor"); c != "" {
		if before, ok = sandbox.CursorPos(c); !ok {
			return 0, 0, "cursor"
		}
	}
	return limit, before, ""
}

// listNewestFirst walks objs (in creation order) newest first from just
// before the cursor position, and returns snapshots of up to limit that
// match and the cursor of the next page ("" at the end). The walk stops at
// the first object past the window's lower bound (done): a list narrowed
// to a recent window reads that window, not every object.
func listNewestFirst[T listable](objs []T, before, limit int, match, done func(T) bool) ([]any, string) {
	start := len(objs) - 1
	if before >= 0 && before-1 < start {
		start = before - 1
	}
	items := []any{}
	last := -1
	for i := start; i >= 0; i-- {
		if done(objs[i]) {
			break
		}
		if !match(objs[i]) {
			continue
		}
		if len(items) == limit {
			// Another one matches: the next page starts after the last taken.
			return items, sandbox.Cursor(last)
		}
		items = append(items, objs[i].snapshot())
		last = i
	}
	return items, ""
}
