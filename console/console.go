package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// Backlog is what JetStream holds for the daemon's consumer.
type Backlog struct {
	// Pending: commands not yet delivered to any replica.
	Pending uint64
	// AckPending: delivered, neither acknowledged nor terminated.
	AckPending int
	// Redelivered: delivered more than once and still unacknowledged.
	Redelivered int
}

// Conflict is a conflict result found in JetStream.
type Conflict struct {
	Result      operation.Result
	PublishedAt time.Time
}

// ConflictScan is the conflicts among the newest results in JetStream.
type ConflictScan struct {
	Conflicts []Conflict
	// Scanned is how many results were read (the newest ones).
	Scanned int
	// Since is when the oldest result read was published: the scan says
	// nothing of conflicts before it.
	Since time.Time
}

// ReplicaCounters are what this replica counted since it started of the
// deliveries that leave no row of their own in the journal.
type ReplicaCounters struct {
	// ReplaysSucceeded and ReplaysFailed are deliveries answered with an
	// operation's stored final result, succeeded or failed_final (claim
	// decisions replay_succeeded and replay_failed).
	ReplaysSucceeded, ReplaysFailed int64
	// Conflicts are deliveries refused because their key was reused with
	// another payload (claim decision conflict).
	Conflicts int64
}

// Replays are all the replays counted.
func (n ReplicaCounters) Replays() int64 { return n.ReplaysSucceeded + n.ReplaysFailed }

// Journal is what the console reads of the journal: an operation, its
// attempts and its approval, the unknown and idle lists, the database clock, and the
// searches and counts of journal.Browser. The console writes nothing there
// but through Deps.Resolve.
type Journal interface {
	journal.Browser
	Get(ctx context.Context, key string) (journal.Record, error)
	Attempts(ctx context.Context, key string) ([]journal.Attempt, error)
	// Approval is an intent's approval record (journal.ErrNotFound when it
	// never needed one), shown on its operation page.
	Approval(ctx context.Context, key string) (journal.Approval, error)
	// answer.Journal: the lists of the unresolved.
	answer.Journal
	Now(ctx context.Context) (time.Time, error)
}

// Deps are what the console reads and calls.
type Deps struct {
	// Store is the journal, read through Journal (both engines' stores
	// satisfy it); the console writes only through Resolve.
	Store Journal
	// Resolve records an operator's decision and publishes it as the
	// command's result (the daemon passes worker.Resolve).
	Resolve func(context.Context, journal.Resolution) (journal.Record, error)
	// Backlog reads the consumer's backlog; nil shows none.
	Backlog func(context.Context) (Backlog, error)
	// Conflicts scans the newest results for conflicts; nil shows none.
	Conflicts func(context.Context) (ConflictScan, error)
	// Counters are this replica's counts since it started of replays and
	// conflicts, which the journal does not keep; nil shows none.
	Counters func() ReplicaCounters
	// Process reads a process for its page (the daemon builds it as
	// `idemgate trace` does: the record, each step and compensation, the
	// timeline); journal.ErrNotFound for an unknown key. Nil: no process
	// page.
	Process func(ctx context.Context, key string) (ProcessPage, error)
	// ResolveProcess records an operator's settlement of a process left
	// for review and publishes its result (an error wrapping
	// ErrNotPublished when only the first was done); nil: processes are
	// settled with idemgate resolve only.
	ResolveProcess func(ctx context.Context, r journal.ProcessResolution) (journal.ProcessRecord, error)
	// Looker asks the targets what they hold for an operation's key (the
	// resolve form's "look up now", and the check of a decision before it
	// is confirmed); nil: nothing is looked up, and the pages say so.
	Looker Looker
	// ObjectURL is where an operator sees an operation's object in the
	// target's own interface ("" for none); nil links nothing.
	ObjectURL func(journal.Record) string
	// Env and Types turn an intent id into its keys.
	Env   string
	Types []string
	// Answers are the answers' thresholds (reconciler.review_after and
	// idle_after): an operation's page tells its answer as every face does,
	// and the Unresolved pages (unknown outcomes, idle retries) list what
	// answer calls unresolved (answer.Thresholds.ListUnresolved). Zero fields take answer's defaults.
	Answers answer.Thresholds
	// Approvals decides approvals for the Approvals page (the one entry
	// every face calls); nil: approvals are off and the page says so.
	Approvals *approval.Service
	// Decided is called after a decision was recorded (the daemon nudges
	// its approvals sweeper, which carries it out); nil: the next sweep.
	Decided func()
	Log     *slog.Logger
	// Now is the clock of sessions; default time.Now.
	Now func() time.Time
}

// Console serves the pages. Build it with New.
type Console struct {
	cfg   Config
	d     Deps
	sign  signer
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New builds the console. The session key is read from
// cfg.SessionKeyFile, or made up at random.
func New(cfg Config, d Deps) (*Console, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Store == nil {
		return nil, errors.New("console: no journal")
	}
	d.Answers = d.Answers.WithDefaults()
	if d.Resolve == nil {
		return nil, errors.New("console: no resolve function")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	key := newKey()
	if cfg.SessionKeyFile != "" {
		k, err := os.ReadFile(cfg.SessionKeyFile)
		if err != nil {
			return nil, fmt.Errorf("console.session_key_file: %w", err)
		}
		k = bytes.TrimSpace(k)
		if len(k) < 32 {
			return nil, fmt.Errorf("console.session_key_file %s: %d bytes, at least 32", cfg.SessionKeyFile, len(k))
		}
		key = k
	}
	c := &Console{cfg: cfg, d: d, sign: signer{key: key}, pages: map[string]*template.Template{}}
	if err := c.parse(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func (c *Console) parse() error {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("console template %s: %w", n, err)
		}
		c.pages[n[len("templates/"):]] = t
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /ui/login", c.loginPage)
	m.HandleFunc("POST /ui/login", c.login)
	m.HandleFunc("POST /ui/logout", c.authed(RoleViewer, c.logout))
	m.HandleFunc("GET /ui/{$}", c.authed(RoleViewer, c.overview))
	m.HandleFunc("GET /ui/operations", c.authed(RoleViewer, c.operations))
	m.HandleFunc("GET /ui/operation", c.authed(RoleViewer, c.operation))
	m.HandleFunc("GET /ui/process", c.authed(RoleViewer, c.process))
	m.HandleFunc("POST /ui/process/resolve", c.authed(RoleOperator, c.resolveProcess))
	m.HandleFunc("GET /ui/unresolved", c.authed(RoleViewer, c.unresolved))
	m.HandleFunc("GET /ui/idle", c.authed(RoleViewer, c.idle))
	m.HandleFunc("GET /ui/conflicts", c.authed(RoleViewer, c.conflicts))
	m.HandleFunc("GET /ui/resolve", c.authed(RoleOperator, c.resolveForm))
	m.HandleFunc("POST /ui/resolve/lookup", c.authed(RoleOperator, c.resolveLookup))
	m.HandleFunc("POST /ui/resolve/confirm", c.authed(RoleOperator, c.resolveConfirm))
	m.HandleFunc("POST /ui/resolve", c.authed(RoleOperator, c.resolve))
	m.HandleFunc("GET /ui/approvals", c.authed(RoleApprover, c.approvals))
	m.HandleFunc("GET /ui/approval", c.authed(RoleApprover, c.approvalPage))
	m.HandleFunc("POST /ui/approval/confirm", c.authed(RoleApprover, c.approvalConfirm))
	m.HandleFunc("POST /ui/approval", c.authed(RoleApprover, c.approvalDecide))
	c.mux = m
}

// view is what every page template receives.
type view struct {
	Title   string
	Nav     string
	User    *session
	CSRF    string
	Flash   string
	Error   string
	Data    any
	Now     time.Time
	CanEdit bool
	// CanApprove: the user may decide approvals.
	CanApprove bool
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	t, ok := c.pages[page]
	if !ok {
		http.Error(w, "no page "+page, http.StatusInternalServerError)
		return
	}
	if se, ok := c.current(r); ok && v.User == nil {
		v.User = &se
	}
	if v.User != nil {
		v.CSRF = c.sign.csrf(*v.User)
		v.CanEdit = v.User.Role == RoleOperator
		v.CanApprove = v.User.Approver
	}
	v.Now = c.d.Now().UTC()
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		c.d.Log.Error("console: render", "page", page, "error", err.Error())
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail shows an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error.html", view{Title: http.StatusText(status), Error: msg})
}

// current is the request's session: the proxy's header when configured
// and present, else a valid signed cookie.
func (c *Console) current(r *http.Request) (session, bool) {
	if c.cfg.ProxyHeader != "" {
		if name := r.Header.Get(c.cfg.ProxyHeader); name != "" {
			role := RoleViewer
			if slices.Contains(c.cfg.ProxyOperators, name) {
				role = RoleOperator
			}
			return session{Name: name, Role: role, Proxy: true, Exp: c.d.Now().Add(time.Hour).Unix()}, true
		}
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	return c.sign.decode(ck.Value, c.d.Now())
}

type sessionKey struct{}

// authed lets a request through with a session of at least role; a POST
// also needs the session's CSRF token.
func (c *Console) authed(role string, h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se, ok := c.current(r)
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, http.StatusUnauthorized, "not logged in")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !c.sign.csrfOK(se, r) {
				c.d.Log.Warn("console: form refused without a valid CSRF token", "user", se.Name, "path", r.URL.Path)
				c.fail(w, r, http.StatusForbidden, "this form is missing its CSRF token or it is not this session's: reload the page and try again")
				return
			}
		}
		if role == RoleOperator && se.Role != RoleOperator {
			c.fail(w, r, http.StatusForbidden, se.Name+" is a "+se.Role+": resolving needs the operator role")
			return
		}
		if role == RoleApprover && !se.Approver {
			c.fail(w, r, http.StatusForbidden, se.Name+" is a "+se.Role+" and not an approver: deciding approvals needs the approver role")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, se)), se)
	}
}
