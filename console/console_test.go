package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/console"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/worker"
)

const (
	operatorToken = "op-token-3f9a1c"
	viewerToken   = "viewer-token-77b2"
)

type fixture struct {
	srv   *httptest.Server
	store journal.Store
}

// store is a journal as the daemon opens it: a Store that serves the
// console's reads too.
type store interface {
	journal.Store
	journal.Browser
}

// engines runs a test on each journal engine the console reads.
func engines(t *testing.T, test func(t *testing.T, engine string)) {
	for _, e := range []string{"sqlite", "postgres"} {
		t.Run(e, func(t *testing.T) {
			t.Parallel()
			test(t, e)
		})
	}
}

func newFixture(t *testing.T, engine string, tune func(*console.Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	var st store
	if engine == "postgres" {
		st = pgtest.Store(t)
	} else {
		lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
		require.NoError(t, err)
		t.Cleanup(lite.Close)
		st = lite
	}
	cfg := console.Config{Enabled: true, Users: []console.User{
		{Name: "alice", Role: console.RoleOperator, TokenSHA256: console.HashToken(operatorToken)},
		{Name: "victor", Role: console.RoleViewer, TokenSHA256: console.HashToken(viewerToken)},
	}, PageSize: 3}
	if tune != nil {
		tune(&cfg)
	}
	// The console is handed the reads it declares (console.Journal) and
	// nothing more: it cannot reach the journal's writes.
	c, err := console.New(cfg, console.Deps{Store: struct{ console.Journal }{st}, Env: "test", Types: []string{"crm.task.create"}, Answers: answer.Thresholds{IdleAfter: time.Hour},
		ObjectURL: func(rec journal.Record) string { return "https://crm.example/tasks/" + rec.TargetObjectID },
		Resolve: func(ctx context.Context, r journal.Resolution) (journal.Record, error) {
			return worker.Resolve(ctx, worker.Deps{Store: st}, r)
		}})
	require.NoError(t, err)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, store: st}
}

// unknown makes an operation whose outcome is unknown.
func (f *fixture) unknown(t *testing.T, intent string) string {
	t.Helper()
	ctx := context.Background()
	k := "test:crm.task.create:" + intent + ":v1"
	c, err := journal.ClaimOne(ctx, f.store, journal.ClaimRequest{Key: k, OperationType: "crm.task.create", RequestHash: "h",
		TargetSystem: "crm", EventID: "evt-" + intent, Owner: "w1", LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(ctx, f.store, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusUnknown,
		ErrorCode: "timeout", Note: "call timed out after send"}))
	return k
}

// lookedUp records n lookups of the unknown operation k that could not
// settle it (reconcile rounds), as the reconciler does; after
// answer.DefaultReviewAfter of them it is unresolved.
func (f *fixture) lookedUp(t *testing.T, k string, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		c, err := journal.ClaimOne(ctx, f.store, journal.ClaimRequest{Key: k, OperationType: "crm.task.create", RequestHash: "h",
			TargetSystem: "crm", Owner: "w1", LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Equal(t, journal.Reconcile, c.Decision)
		require.NoError(t, journal.CompleteOne(ctx, f.store, journal.Completion{Key: k, Token: c.Token, Status: journal.StatusUnknown,
			Reconciled: true, ErrorCode: "timeout", Note: "lookup indeterminate"}))
	}
}

type browser struct {
	t      *testing.T
	c      *http.Client
	base   string
	header http.Header
}

func (f *fixture) client(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: f.srv.URL, header: http.Header{}, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range b.header {
		req.Header[k] = v
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, string(out), resp.Header
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	require.NotNil(t, m, "the page carries a CSRF token:\n%s", page)
	return m[1]
}

func (b *browser) login(token string) int {
	b.t.Helper()
	_, page, _ := b.do("GET", "/ui/login", nil)
	code, _, _ := b.do("POST", "/ui/login", url.Values{"csrf": {csrfOf(b.t, page)}, "token": {token}})
	return code
}

func TestLoginRefusesAWrongTokenAndAFormWithoutCSRF(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine, nil)
		b := f.client(t)
		code, _, h := b.do("GET", "/ui/operations?status=unknown", nil)
		require.Equal(t, http.StatusSeeOther, code, "not logged in: to the login page")
		require.Equal(t, "/ui/login?next="+url.QueryEscape("/ui/operations?status=unknown"), h.Get("Location"))

		_, page, _ := b.do("GET", "/ui/login", nil)
		tok := csrfOf(t, page)
		code, body, _ := b.do("POST", "/ui/login", url.Values{"token": {operatorToken}})
		require.Equal(t, http.StatusForbidden, code, "no CSRF token: refused even with the right token")
		require.Contains(t, body, "CSRF")
		code, _, _ = b.do("POST", "/ui/login", url.Values{"csrf": {"forged"}, "token": {operatorToken}})
		require.Equal(t, http.StatusForbidden, code)
		code, body, _ = b.do("POST", "/ui/login", url.Values{"csrf": {tok}, "token": {"not-the-token"}})
		require.Equal(t, http.StatusUnauthorized, code)
		require.Contains(t, body, "wrong token")
		code, _, _ = b.do("GET", "/ui/", nil)
		require.Equal(t, http.StatusSeeOther, code, "still not logged in")

		require.Equal(t, http.StatusSeeOther, b.login(operatorToken))
		code, body, _ = b.do("GET", "/ui/", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `<span id="user">alice</span>`)
		require.Contains(t, body, "Operations by type and status")

		// A forged or tampered cookie is no session.
		other := f.client(t)
		u, _ := url.Parse(f.srv.URL)
		for _, ck := range b.c.Jar.Cookies(u) {
			if ck.Name == "idemgate_console" {
				p, sig, _ := strings.Cut(ck.Value, ".")
				other.c.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: p + "x." + sig, Path: "/ui/"}})
			}
		}
		code, _, _ = other.do("GET", "/ui/", nil)
		require.Equal(t, http.StatusSeeOther, code)

		// Logging out needs the CSRF token too.
		code, _, _ = b.do("POST", "/ui/logout", url.Values{})
		require.Equal(t, http.StatusForbidden, code)
		_, page, _ = b.do("GET", "/ui/", nil)
		code, _, _ = b.do("POST", "/ui/logout", url.Values{"csrf": {csrfOf(t, page)}})
		require.Equal(t, http.StatusSeeOther, code)
		code, _, _ = b.do("GET", "/ui/", nil)
		require.Equal(t, http.StatusSeeOther, code)
	})
}

func TestResolveNeedsTheOperatorCSRFEvidenceAndConfirmation(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine, nil)
		key := f.unknown(t, "task-1")
		ctx := context.Background()

		viewer := f.client(t)
		require.Equal(t, http.StatusSeeOther, viewer.login(viewerToken))
		code, page, _ := viewer.do("GET", "/ui/unresolved", nil)
		require.Equal(t, http.StatusOK, code)
		require.NotContains(t, page, key, "still being looked up: not unresolved before review_after lookups")
		f.lookedUp(t, key, answer.DefaultReviewAfter)
		code, page, _ = viewer.do("GET", "/ui/unresolved", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, key)
		require.Contains(t, page, "call timed out after send", "what the attempt said")
		require.NotContains(t, page, "Resolve…", "a viewer is offered no resolve")
		code, _, _ = viewer.do("POST", "/ui/resolve", url.Values{"csrf": {csrfOf(t, page)}, "key": {key}, "as": {"failed_final"},
			"code": {"x"}, "evidence": {"checked"}, "confirm": {"yes"}})
		require.Equal(t, http.StatusForbidden, code, "a viewer cannot resolve")

		op := f.client(t)
		require.Equal(t, http.StatusSeeOther, op.login(operatorToken))
		code, form, _ := op.do("GET", "/ui/resolve?key="+url.QueryEscape(key), nil)
		require.Equal(t, http.StatusOK, code)
		decision := url.Values{"key": {key}, "as": {"succeeded"}, "object": {"task-991"}, "evidence": {"task 991 found in the CRM by its external id"}, "confirm": {"yes"}}
		code, body, _ := op.do("POST", "/ui/resolve", decision)
		require.Equal(t, http.StatusForbidden, code, "no CSRF token")
		require.Contains(t, body, "CSRF")
		decision.Set("csrf", "forged")
		code, _, _ = op.do("POST", "/ui/resolve", decision)
		require.Equal(t, http.StatusForbidden, code)
		viewersToken := csrfOf(t, page)
		decision.Set("csrf", viewersToken)
		code, _, _ = op.do("POST", "/ui/resolve", decision)
		require.Equal(t, http.StatusForbidden, code, "another session's token")
		rec, err := f.store.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, journal.StatusUnknown, rec.Status, "nothing refused wrote anything")

		tok := csrfOf(t, form)
		noEvidence := url.Values{"csrf": {tok}, "key": {key}, "as": {"succeeded"}, "object": {"task-991"}}
		code, body, _ = op.do("POST", "/ui/resolve/confirm", noEvidence)
		require.Equal(t, http.StatusBadRequest, code)
		require.Contains(t, body, "needs evidence")
		decision.Set("csrf", tok)
		decision.Del("confirm")
		code, body, _ = op.do("POST", "/ui/resolve", decision)
		require.Equal(t, http.StatusBadRequest, code, "not confirmed")
		require.Contains(t, body, "not confirmed")
		code, body, _ = op.do("POST", "/ui/resolve/confirm", decision)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "Confirm: record and publish")
		rec, err = f.store.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, journal.StatusUnknown, rec.Status, "the review step writes nothing")

		decision.Set("confirm", "yes")
		code, _, h := op.do("POST", "/ui/resolve", decision)
		require.Equal(t, http.StatusSeeOther, code)
		code, body, _ = op.do("GET", h.Get("Location"), nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "Resolved as succeeded")
		require.Contains(t, body, `<a href="https://crm.example/tasks/task-991" id="op-link"`, "the object's page in the target")
		rec, err = f.store.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, journal.StatusSucceeded, rec.Status)
		require.Equal(t, "task-991", rec.TargetObjectID)
		atts, err := f.store.Attempts(ctx, key)
		require.NoError(t, err)
		last := atts[len(atts)-1]
		require.Equal(t, journal.KindOperator, last.Kind)
		require.Equal(t, "alice", last.Worker)
		require.Contains(t, last.Note, "task 991 found in the CRM")

		// A final operation is not resolved again.
		code, _, _ = op.do("POST", "/ui/resolve", decision)
		require.Equal(t, http.StatusConflict, code)
	})
}

func TestSearchPagesByKeyset(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine, nil)
		var keys []string
		for i := range 7 {
			keys = append(keys, f.unknown(t, fmt.Sprintf("page-%d", i)))
			time.Sleep(2 * time.Millisecond)
		}
		b := f.client(t)
		require.Equal(t, http.StatusSeeOther, b.login(viewerToken))
		rowRe := regexp.MustCompile(`<td><a href="/ui/operation\?key=[^"]+">([^<]+)</a></td>`)
		nextRe := regexp.MustCompile(`<a href="([^"]+)" id="next">`)
		var seen []string
		path := "/ui/operations?status=unknown&type=crm.task.create"
		for range 5 {
			code, page, _ := b.do("GET", path, nil)
			require.Equal(t, http.StatusOK, code)
			for _, m := range rowRe.FindAllStringSubmatch(page, -1) {
				seen = append(seen, m[1])
			}
			m := nextRe.FindStringSubmatch(page)
			if m == nil {
				break
			}
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
		require.Equal(t, []string{keys[6], keys[5], keys[4], keys[3], keys[2], keys[1], keys[0]}, seen, "three a page, newest first, none twice")

		code, page, _ := b.do("GET", "/ui/operations?intent=page-3", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, keys[3])
		require.NotContains(t, page, keys[2])
		code, page, _ = b.do("GET", "/ui/operations?from=yesterday", nil)
		require.Equal(t, http.StatusBadRequest, code)
		require.Contains(t, page, "YYYY-MM-DDTHH:MM")
		code, _, _ = b.do("GET", "/ui/operations?after=garbage", nil)
		require.Equal(t, http.StatusBadRequest, code)
		code, page, _ = b.do("GET", "/ui/operation?key="+url.QueryEscape(keys[3]), nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, "call timed out after send")
		require.NotContains(t, page, "op-link", "no object, no link")
		code, _, _ = b.do("GET", "/ui/operation?key=test:nope", nil)
		require.Equal(t, http.StatusNotFound, code)

		code, page, _ = b.do("GET", "/ui/", nil)
		require.Equal(t, http.StatusOK, code)
		require.Regexp(t, `<td><a href="/ui/operations\?type=crm.task.create">crm.task.create</a></td><td>0</td><td>0</td><td>0</td><td>0</td><td><a href="[^"]+">7</a></td>`, page)
		require.Regexp(t, `<b>0</b> unresolved unknown outcomes<small>after 5 lookups; 0 raised for review`, page,
			"seven unknown outcomes, none looked up review_after times yet")
		f.lookedUp(t, keys[1], answer.DefaultReviewAfter)
		f.lookedUp(t, keys[4], answer.DefaultReviewAfter)
		f.lookedUp(t, keys[5], answer.DefaultReviewAfter-1)
		code, page, _ = b.do("GET", "/ui/", nil)
		require.Equal(t, http.StatusOK, code)
		require.Regexp(t, `<b>2</b> unresolved unknown outcomes`, page, "the two looked up review_after times")
		require.Regexp(t, `<b>0</b> unresolved idle retries<small>idle 1h0m0s: the agent must resend`, page)
		code, page, _ = b.do("GET", "/ui/unresolved", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, keys[1])
		require.Contains(t, page, keys[4])
		require.NotContains(t, page, keys[5], "one lookup short of review_after")
		require.NotContains(t, page, keys[0])
		code, page, _ = b.do("GET", "/ui/idle", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, "No idle retry.")
		code, page, _ = b.do("GET", "/ui/conflicts", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, "cannot read JetStream")
	})
}

func TestProxyHeaderNamesTheUser(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine, func(c *console.Config) {
			c.Users = nil
			c.ProxyHeader = "X-Forwarded-User"
			c.ProxyOperators = []string{"olga"}
		})
		key := f.unknown(t, "proxied")
		b := f.client(t)
		code, _, _ := b.do("GET", "/ui/", nil)
		require.Equal(t, http.StatusSeeOther, code, "without the header: the login page")
		b.header.Set("X-Forwarded-User", "pavel")
		code, page, _ := b.do("GET", "/ui/operation?key="+url.QueryEscape(key), nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, `<span id="user">pavel</span> <span class="role">viewer</span>`)
		require.NotContains(t, page, "resolve-link")
		b.header.Set("X-Forwarded-User", "olga")
		code, page, _ = b.do("GET", "/ui/resolve?key="+url.QueryEscape(key), nil)
		require.Equal(t, http.StatusOK, code)
		code, _, _ = b.do("POST", "/ui/resolve", url.Values{"key": {key}, "as": {"failed_final"}, "code": {"none"}, "evidence": {"not in the CRM"}, "confirm": {"yes"}})
		require.Equal(t, http.StatusForbidden, code, "the proxy's users need the CSRF token too")
		code, _, _ = b.do("POST", "/ui/resolve", url.Values{"csrf": {csrfOf(t, page)}, "key": {key}, "as": {"failed_final"}, "code": {"none"}, "evidence": {"not in the CRM"}, "confirm": {"yes"}})
		require.Equal(t, http.StatusSeeOther, code)
		atts, err := f.store.Attempts(context.Background(), key)
		require.NoError(t, err)
		require.Equal(t, "olga", atts[len(atts)-1].Worker)
	})
}

func TestConfigRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg  console.Config
		want string
	}{
		"nobody":          {console.Config{Enabled: true}, "nobody could log in"},
		"role":            {console.Config{Enabled: true, Users: []console.User{{Name: "a", Role: "admin", TokenSHA256: console.HashToken("x")}}}, "viewer, operator or approver"},
		"viewer approver": {console.Config{Enabled: true, Users: []console.User{{Name: "a", Role: "viewer", Approver: true, TokenSHA256: console.HashToken("x")}}}, "a viewer is never an approver"},
		"hash":            {console.Config{Enabled: true, Users: []console.User{{Name: "a", Role: "viewer", TokenSHA256: "plaintext"}}}, "64 hex digits"},
		"twice":           {console.Config{Enabled: true, Users: []console.User{{Name: "a", Role: "viewer", TokenSHA256: console.HashToken("x")}, {Name: "a", Role: "viewer", TokenSHA256: console.HashToken("y")}}}, "named twice"},
		"page size":       {console.Config{Enabled: true, ProxyHeader: "X-User", PageSize: 10000}, "page_size"},
	} {
		err := tc.cfg.WithDefaults().Validate()
		require.ErrorContains(t, err, tc.want, name)
	}
	require.NoError(t, console.Config{}.Validate(), "disabled: nothing to check")
}
