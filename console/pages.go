package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
)

// ErrNotPublished wraps a Resolve error when the decision was recorded but
// its result could not be published (the command's next delivery replays
// it).
var ErrNotPublished = errors.New("console: the decision was recorded but its result was not published")

// listLimit bounds the unresolved, idle and conflict lists.
const listLimit = 200

var funcs = template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"dash": func(s string) string {
		if s == "" {
			return "–"
		}
		return s
	},
	"pretty": func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return "–"
		}
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") != nil {
			return string(raw)
		}
		return b.String()
	},
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return now.Sub(t).Round(time.Second).String()
	},
	"opURL": func(key string) string { return "/ui/operation?key=" + url.QueryEscape(key) },
	"final": func(s journal.Status) bool { return s.Terminal() },
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// ---- login ----

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.renderLogin(w, r, http.StatusOK, "")
}

// renderLogin shows the login form with a fresh login CSRF token: a random
// value in a cookie that the form must echo (the session's token cannot
// serve before there is a session).
func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := randomID()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: tok, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: 3600})
	next := r.FormValue("next")
	c.render(w, r, status, "login.html", view{Title: "Log in", Error: msg, User: &session{}, Data: map[string]any{
		"Token": tok, "Next": next, "Proxy": c.cfg.ProxyHeader}})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || r.PostFormValue(csrfField) != ck.Value {
		c.d.Log.Warn("console: login refused without a valid CSRF token", "remote", r.RemoteAddr)
		c.fail(w, r, http.StatusForbidden, "the login form is missing its CSRF token: reload the page and try again")
		return
	}
	u, ok := lookupToken(c.cfg.Users, r.PostFormValue("token"))
	if !ok {
		c.d.Log.Warn("console: login refused: wrong token", "remote", r.RemoteAddr)
		c.renderLogin(w, r, http.StatusUnauthorized, "wrong token")
		return
	}
	se := session{Name: u.Name, Role: u.Role, ID: randomID(), Exp: c.d.Now().Add(c.cfg.SessionTTL).Unix(), Approver: u.approves()}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.sign.encode(se), Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, Expires: time.Unix(se.Exp, 0)})
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Path: Prefix, MaxAge: -1})
	c.d.Log.Info("console: logged in", "user", u.Name, "role", u.Role)
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") {
		next = Prefix
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ session) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: Prefix, MaxAge: -1})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// ---- overview ----

type overviewData struct {
	Types      []string
	Statuses   []journal.Status
	Counts     map[string]map[journal.Status]int64
	Totals     map[journal.Status]int64
	Total      int64
	Activity   []journal.AttemptCount
	ActivityBy map[string]int64
	// Unresolved and Idle count the two kinds of unresolved operation
	// (answer.Thresholds.ListUnresolved): unknown outcomes after
	// review_after lookups, retryable failures idle for idle_after.
	Unresolved   int
	Raised       int
	Idle         int
	Answers      answer.Thresholds
	ListLimit    int
	Holders      []journal.LeaseHolder
	Backlog      *Backlog
	BacklogError string
	Counters     *ReplicaCounters
}

var allStatuses = []journal.Status{journal.StatusStarted, journal.StatusSucceeded, journal.StatusFailedRetryable, journal.StatusFailedFinal, journal.StatusUnknown}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, _ session) {
	ctx := r.Context()
	counts, err := c.d.Store.StatusCounts(ctx)
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	d := overviewData{Statuses: allStatuses, Counts: map[string]map[journal.Status]int64{}, Totals: map[journal.Status]int64{},
		ActivityBy: map[string]int64{}, ListLimit: listLimit, Answers: c.d.Answers}
	for _, sc := range counts {
		if d.Counts[sc.OperationType] == nil {
			d.Counts[sc.OperationType] = map[journal.Status]int64{}
			d.Types = append(d.Types, sc.OperationType)
		}
		d.Counts[sc.OperationType][sc.Status] += sc.Count
		d.Totals[sc.Status] += sc.Count
		d.Total += sc.Count
	}
	sort.Strings(d.Types)
	now, err := c.d.Store.Now(ctx)
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	if d.Activity, err = c.d.Store.AttemptCounts(ctx, now.Add(-time.Hour)); err != nil {
		c.failJournal(w, r, err)
		return
	}
	for _, a := range d.Activity {
		d.ActivityBy[string(a.Kind)+"/"+string(a.Outcome)] += a.Count
		d.ActivityBy[string(a.Kind)] += a.Count
		d.ActivityBy["outcome/"+string(a.Outcome)] += a.Count
	}
	l, err := c.d.Answers.ListUnresolved(ctx, c.d.Store, listLimit)
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	d.Unresolved, d.Idle = len(l.Unknown), len(l.IdleRetry)
	for _, u := range l.Unknown {
		if !u.RaisedAt.IsZero() {
			d.Raised++
		}
	}
	if d.Holders, err = c.d.Store.LeaseHolders(ctx); err != nil {
		c.failJournal(w, r, err)
		return
	}
	if c.d.Backlog != nil {
		b, err := c.d.Backlog(ctx)
		if err != nil {
			d.BacklogError = err.Error()
		} else {
			d.Backlog = &b
		}
	}
	if c.d.Counters != nil {
		n := c.d.Counters()
		d.Counters = &n
	}
	c.render(w, r, http.StatusOK, "overview.html", view{Title: "Overview", Nav: "overview", Data: d})
}

func (c *Console) failJournal(w http.ResponseWriter, r *http.Request, err error) {
	c.d.Log.Error("console: journal read failed", "error", err.Error())
	c.fail(w, r, http.StatusServiceUnavailable, "the journal did not answer: "+err.Error())
}

// ---- operations ----

type searchForm struct {
	Key, Intent, Event, Object, Status, Type, From, To string
}

type operationsData struct {
	Form  searchForm
	Rows  []journal.Record
	Next  string
	First string
	Paged bool
	Types []string
	All   []journal.Status
}

const formTime = "2006-01-02T15:04"

func parseFormTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{formTime, "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: use YYYY-MM-DDTHH:MM (UTC)", s)
}

// encodeCursor packs a keyset position into a URL parameter.
func encodeCursor(cur journal.Cursor) string {
	return strconv.FormatInt(cur.CreatedAt.UnixMicro(), 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(cur.Key))
}

func decodeCursor(s string) (*journal.Cursor, error) {
	if s == "" {
		return nil, nil
	}
	us, k, ok := strings.Cut(s, ".")
	micro, err := strconv.ParseInt(us, 10, 64)
	key, kerr := base64.RawURLEncoding.DecodeString(k)
	if !ok || err != nil || kerr != nil || len(key) == 0 {
		return nil, fmt.Errorf("page cursor %q is not one this console made", s)
	}
	return &journal.Cursor{CreatedAt: time.UnixMicro(micro).UTC(), Key: string(key)}, nil
}

func (c *Console) operations(w http.ResponseWriter, r *http.Request, _ session) {
	q := r.URL.Query()
	f := searchForm{Key: strings.TrimSpace(q.Get("key")), Intent: strings.TrimSpace(q.Get("intent")), Event: strings.TrimSpace(q.Get("event")),
		Object: strings.TrimSpace(q.Get("object")), Status: q.Get("status"), Type: q.Get("type"), From: q.Get("from"), To: q.Get("to")}
	d := operationsData{Form: f, Types: c.d.Types, All: allStatuses}
	bad := func(err error) {
		c.render(w, r, http.StatusBadRequest, "operations.html", view{Title: "Operations", Nav: "operations", Error: err.Error(), Data: d})
	}
	from, err := parseFormTime(f.From)
	if err != nil {
		bad(fmt.Errorf("from: %w", err))
		return
	}
	to, err := parseFormTime(f.To)
	if err != nil {
		bad(fmt.Errorf("to: %w", err))
		return
	}
	after, err := decodeCursor(q.Get("after"))
	if err != nil {
		bad(err)
		return
	}
	sq := journal.SearchQuery{Key: f.Key, IntentID: f.Intent, EventID: f.Event, TargetObjectID: f.Object,
		Status: journal.Status(f.Status), OperationType: f.Type, From: from, To: to, After: after,
		Env: c.d.Env, Types: c.d.Types, Limit: c.cfg.PageSize + 1}
	rows, err := c.d.Store.Search(r.Context(), sq)
	if errors.Is(err, journal.ErrInvalid) {
		bad(err)
		return
	}
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	base := url.Values{}
	for k, v := range map[string]string{"key": f.Key, "intent": f.Intent, "event": f.Event, "object": f.Object,
		"status": f.Status, "type": f.Type, "from": f.From, "to": f.To} {
		if v != "" {
			base.Set(k, v)
		}
	}
	d.First = "/ui/operations?" + base.Encode()
	d.Paged = after != nil
	if len(rows) > c.cfg.PageSize {
		rows = rows[:c.cfg.PageSize]
		base.Set("after", encodeCursor(journal.CursorOf(rows[len(rows)-1])))
		d.Next = "/ui/operations?" + base.Encode()
	}
	d.Rows = rows
	c.render(w, r, http.StatusOK, "operations.html", view{Title: "Operations", Nav: "operations", Data: d})
}

// ---- one operation ----

type operationData struct {
	Rec      journal.Record
	Attempts []journal.Attempt
	// Link is the object's page in the target, when its adapter knows one.
	Link string
	// Answer is what every face answers for the operation now.
	Answer answer.Answer
	// Approval is the intent's approval record with its decisions (nil
	// when it never needed one).
	Approval *journal.Approval
	// Decide links the approval page (the Approvals page is on here).
	Decide bool
}

func (c *Console) operation(w http.ResponseWriter, r *http.Request, _ session) {
	key := r.URL.Query().Get("key")
	if isProcessKey(key) && c.d.Process != nil {
		http.Redirect(w, r, "/ui/process?key="+url.QueryEscape(key), http.StatusSeeOther)
		return
	}
	rec, err := c.d.Store.Get(r.Context(), key)
	if errors.Is(err, journal.ErrNotFound) || key == "" {
		c.fail(w, r, http.StatusNotFound, "no operation "+strconv.Quote(key)+" in the journal")
		return
	}
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	atts, err := c.d.Store.Attempts(r.Context(), key)
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	var appr *journal.Approval
	switch a, err := c.d.Store.Approval(r.Context(), key); {
	case err == nil:
		appr = &a
	case !errors.Is(err, journal.ErrNotFound):
		c.failJournal(w, r, err)
		return
	}
	flash := ""
	if r.URL.Query().Get("resolved") != "" {
		flash = "Resolved as " + string(rec.Status) + ": written to the trail"
		if r.URL.Query().Get("published") == "1" {
			flash += " and published as the command's result."
		} else {
			flash += "; the result was not published (the command's next delivery replays it)."
		}
	}
	c.render(w, r, http.StatusOK, "operation.html", view{Title: rec.Key, Nav: "operations", Flash: flash,
		Data: operationData{Rec: rec, Attempts: atts, Link: c.objectURL(rec), Answer: c.d.Answers.FromRecord(rec, time.Now()),
			Approval: appr, Decide: c.d.Approvals != nil}})
}

func (c *Console) objectURL(rec journal.Record) string {
	if c.d.ObjectURL == nil || rec.TargetObjectID == "" {
		return ""
	}
	return c.d.ObjectURL(rec)
}

// ---- lists ----

type unresolvedRow struct {
	Rec journal.Record
	// Lookups are the lookups and unknown outcomes of the trail, runs of
	// identical ones collapsed into one line each.
	Lookups []lookupRun
}

// unresolved lists the unknown outcomes answer calls unresolved: after
// review_after lookups that could not settle them.
func (c *Console) unresolved(w http.ResponseWriter, r *http.Request, _ session) {
	l, err := c.d.Answers.ListUnresolved(r.Context(), c.d.Store, listLimit)
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	rows := make([]unresolvedRow, 0, len(l.Unknown))
	for _, rec := range l.Unknown {
		atts, err := c.d.Store.Attempts(r.Context(), rec.Key)
		if err != nil {
			c.failJournal(w, r, err)
			return
		}
		var lookups []journal.Attempt
		for _, a := range atts {
			if a.Kind == journal.KindReconcile || a.Outcome == journal.OutcomeUnknown {
				lookups = append(lookups, a)
			}
		}
		rows = append(rows, unresolvedRow{Rec: rec, Lookups: runsOf(lookups)})
	}
	c.render(w, r, http.StatusOK, "unresolved.html", view{Title: "Unresolved: unknown outcomes", Nav: "unresolved",
		Data: map[string]any{"Rows": rows, "Limit": listLimit, "ReviewAfter": c.d.Answers.ReviewAfter}})
}

// idle lists the idle retries answer calls unresolved: retryable failures
// untouched for idle_after.
func (c *Console) idle(w http.ResponseWriter, r *http.Request, _ session) {
	l, err := c.d.Answers.ListUnresolved(r.Context(), c.d.Store, listLimit)
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "idle.html", view{Title: "Unresolved: idle retries", Nav: "idle",
		Data: map[string]any{"Rows": l.IdleRetry, "IdleAfter": c.d.Answers.IdleAfter, "Limit": listLimit}})
}

func (c *Console) conflicts(w http.ResponseWriter, r *http.Request, _ session) {
	d := map[string]any{}
	if c.d.Conflicts == nil {
		d["Unavailable"] = true
	} else {
		scan, err := c.d.Conflicts(r.Context())
		if err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "JetStream did not answer: "+err.Error())
			return
		}
		d["Scan"] = scan
	}
	c.render(w, r, http.StatusOK, "conflicts.html", view{Title: "Conflicts", Nav: "conflicts", Data: d})
}
