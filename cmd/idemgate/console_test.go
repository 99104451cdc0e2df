package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
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

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/console"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/redact"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/worker"
)

// consoleUser is an operator logged in to a console over HTTP.
type consoleUser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func loginConsole(t *testing.T, base, token string) *consoleUser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	u := &consoleUser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 90 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	_, page := u.do("GET", "/ui/login", nil)
	code, _ := u.do("POST", "/ui/login", url.Values{"csrf": {csrfField.FindStringSubmatch(page)[1]}, "token": {token}})
	require.Equal(t, http.StatusSeeOther, code)
	_, page = u.do("GET", "/ui/", nil)
	u.csrf = csrfField.FindStringSubmatch(page)[1]
	return u
}

// do sends a request (a POST with the session's CSRF token) and returns
// the status and the page.
func (u *consoleUser) do(method, path string, form url.Values) (int, string) {
	u.t.Helper()
	var body io.Reader
	if form != nil {
		if u.csrf != "" {
			form.Set("csrf", u.csrf)
		}
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u.base+path, body)
	require.NoError(u.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := u.c.Do(req)
	require.NoError(u.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(u.t, err)
	return resp.StatusCode, html.UnescapeString(string(b))
}

const consoleToken = "console-token-8c2e"

func consoleUsers() []console.User {
	return []console.User{{Name: "olga", Role: console.RoleOperator, TokenSHA256: console.HashToken(consoleToken)}}
}

// TestConsoleCountsReplaysAndConflicts: the overview shows the replays and
// conflicts this replica decided (claim_decisions_total), which leave no
// journal row: a charge, its copy under another event id (a replay) and
// the same intent with another amount (a conflict).
func TestConsoleCountsReplaysAndConflicts(t *testing.T) {
	t.Parallel()
	sb := sbyookassa.New(sbyookassa.Options{})
	sbURL, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	shop, secret := sb.Credentials()
	c := testDaemonConfig(t)
	c.Routes = map[string]string{"payment.charge": "yookassa"}
	c.Adapters.YooKassa = &yookassa.Config{BaseURL: sbURL, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}}
	c.Console.Enabled = true
	c.Console.Users = consoleUsers()
	d := startDaemon(t, c, &lockedWriter{w: &bytes.Buffer{}})

	nc, err := nats.Connect("nats://" + d.natsAddr) // the port the daemon took
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	cl, err := producer.New(nc, "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	charge := func(event string, amount int64) operation.Command {
		return operation.Command{EventID: event, IntentID: "evt-count", Operation: "payment.charge", ApprovalID: "appr-1",
			Payload: json.RawMessage(fmt.Sprintf(`{"account_id":"merchant-account-17","order_id":"order-1","amount_minor":%d,"currency":"RUB"}`, amount))}
	}
	key := "test:payment.charge:evt-count:v1"
	for i, want := range []operation.ResultStatus{operation.ResultSucceeded, operation.ResultSucceeded, operation.ResultConflict} {
		amount := int64(125000)
		if want == operation.ResultConflict {
			amount = 990000
		}
		res, err := cl.PublishAndWait(ctx, charge(fmt.Sprintf("evt-count-%d", i), amount), key, nil)
		require.NoError(t, err)
		require.Equal(t, want, res.Status)
	}
	require.Equal(t, 1, sb.TotalEffects())

	u := loginConsole(t, "http://"+d.adminAddr, consoleToken)
	code, page := u.do("GET", "/ui/", nil)
	require.Equal(t, http.StatusOK, code)
	require.Regexp(t, `id="tile-replays"><b>1</b> replays<small>1 succeeded, 0 failed_final; this replica`, page)
	require.Regexp(t, `id="tile-conflicts"><b>1</b> conflicts`, page)
}

// TestConflictsPageSaysSinceWhen: once a conflict is older than the newest
// results the page reads, the page says there was none since the oldest
// result it examined, not that there was none.
func TestConflictsPageSaysSinceWhen(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	c := testDefaults()
	c.Env = "test"
	c.Console.Enabled = true
	c.Console.Users = consoleUsers()
	_, err := ensureStreams(ctx, nc, js, c, quietLog())
	require.NoError(t, err)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	con, err := newConsole(c, nil, st, js, worker.NewMetrics(nil), quietLog())
	require.NoError(t, err)
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	u := loginConsole(t, srv.URL, consoleToken)

	_, page := u.do("GET", "/ui/conflicts", nil)
	require.Contains(t, page, "No result in JetStream yet.")
	conflictKey := "test:payment.charge:evt-reused:v1"
	require.NoError(t, consumer.PublishResult(ctx, js, operation.Result{OperationKey: conflictKey, EventID: "evt-reused-2",
		Operation: "payment.charge", Status: operation.ResultConflict, ConflictFields: []string{"amount_minor"}}))
	_, page = u.do("GET", "/ui/conflicts", nil)
	require.Contains(t, page, conflictKey)

	for i := range conflictScan {
		require.NoError(t, consumer.PublishResult(ctx, js, operation.Result{OperationKey: fmt.Sprintf("test:payment.charge:evt-%d:v1", i),
			Operation: "payment.charge", Status: operation.ResultSucceeded}))
	}
	stream, err := js.Stream(ctx, c.NATS.ResultsStream)
	require.NoError(t, err)
	oldest, err := stream.GetMsg(ctx, 2) // the conflict is 1
	require.NoError(t, err)
	code, page := u.do("GET", "/ui/conflicts", nil)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, page, conflictKey, "aged out of the newest results")
	require.Contains(t, page, "None since "+oldest.Time.UTC().Format("2006-01-02 15:04:05.000Z")+", when the oldest of the 2000 results examined")
	require.NotContains(t, page, "No conflict.")
}

// TestConsoleLooksUpAndChecksTheObjectID: against the YooKassa sandbox, a
// charge whose answer was lost (the sandbox made it; the journal says
// unknown): "look up now" asks the target through the adapter and fills
// the object in; an object id typed wrong is refused before it reaches the
// agent (409, nothing recorded) with the object the target holds named;
// the right one is confirmed as checked and recorded. An id the target
// does not hold is recorded only over an explicit override, which the
// trail keeps. Nothing here writes a lookup to the journal.
func TestConsoleLooksUpAndChecksTheObjectID(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := sbyookassa.New(sbyookassa.Options{})
	sbURL, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	shop, secret := sb.Credentials()
	c := testDefaults()
	c.Env = "test"
	c.Routes = map[string]string{"payment.charge": "yookassa"}
	c.Adapters.YooKassa = &yookassa.Config{BaseURL: sbURL, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}}
	c.Console.Enabled = true
	c.Console.Users = consoleUsers()
	routes, err := buildAdapters(c, quietLog(), nil)
	require.NoError(t, err)
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	_, err = ensureStreams(ctx, nc, js, c, quietLog())
	require.NoError(t, err)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)

	// A worker's call whose answer was lost: claimed, sent (the sandbox
	// makes the charge), recorded unknown. made: whether the call is sent.
	dec := operation.Decoder{Env: "test"}
	lost := func(intent string, made bool) (string, string) {
		op, err := dec.DecodeCommand(operation.Command{EventID: intent, Operation: "payment.charge", ApprovalID: "appr-" + intent,
			Payload: json.RawMessage(`{"account_id":"merchant-account-17","order_id":"order-` + intent + `","amount_minor":125000,"currency":"RUB"}`)})
		require.NoError(t, err)
		key := op.Key.String()
		cl, err := journal.ClaimOne(ctx, st, journal.ClaimRequest{Key: key, OperationType: op.Type, RequestHash: op.Fingerprint,
			TargetSystem: op.TargetSystem, EventID: op.EventID, ApprovalID: op.ApprovalID, Owner: "w1", LeaseTTL: time.Minute})
		require.NoError(t, err)
		object := ""
		if made {
			out, err := routes[op.Type].Execute(adapters.WithAttempt(ctx, adapters.Attempt{Number: 1, Since: cl.Record.CreatedAt}), op)
			require.NoError(t, err)
			object = out.ObjectID
		}
		require.NoError(t, journal.CompleteOne(ctx, st, journal.Completion{Key: key, Token: cl.Token, Status: journal.StatusUnknown,
			ErrorCode: adapters.CodeTimeoutAfterRequestSent, Note: "answer lost"}))
		return key, object
	}
	madeKey, object := lost("evt-made", true)
	noneKey, _ := lost("evt-none", false)
	require.Equal(t, 1, sb.TotalEffects())

	con, err := newConsole(c, routes, st, js, worker.NewMetrics(nil), quietLog())
	require.NoError(t, err)
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	u := loginConsole(t, srv.URL, consoleToken)
	trail := func(key string) []journal.Attempt {
		atts, err := st.Attempts(ctx, key)
		require.NoError(t, err)
		return atts
	}
	before := len(trail(madeKey))

	// Look up now: the object the sandbox holds, filled in.
	_, form := u.do("GET", "/ui/resolve?key="+url.QueryEscape(madeKey), nil)
	require.Contains(t, form, `id="lookup"`)
	code, form := u.do("POST", "/ui/resolve/lookup", url.Values{"key": {madeKey}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, form, "The target holds "+object+" for this key.")
	require.Contains(t, form, `<input name="object" id="object" value="`+object+`">`)
	require.Regexp(t, `value="succeeded" id="as-succeeded" checked`, form)

	// A mistyped id: the confirmation says what the target holds, and a
	// confirmation without the override is refused; nothing is recorded.
	wrong := url.Values{"key": {madeKey}, "as": {"succeeded"}, "object": {"2d1e0000-000f-5000-9000-000000000000"},
		"evidence": {"payment seen in the YooKassa dashboard"}}
	code, page := u.do("POST", "/ui/resolve/confirm", wrong)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `class="disagrees">The target holds `+object+` for this key, not 2d1e0000-000f-5000-9000-000000000000.`)
	require.Contains(t, page, `id="override" required`)
	require.Contains(t, page, `id="use-found"`)
	wrong.Set("confirm", "yes")
	code, page = u.do("POST", "/ui/resolve", wrong)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, page, "nothing was recorded")
	rec, err := st.Get(ctx, madeKey)
	require.NoError(t, err)
	require.Equal(t, journal.StatusUnknown, rec.Status)
	require.Len(t, trail(madeKey), before, "neither the lookups nor the refusal wrote to the trail")

	// The right id: checked, recorded as typed.
	right := url.Values{"key": {madeKey}, "as": {"succeeded"}, "object": {object}, "evidence": {"payment seen in the YooKassa dashboard"}}
	_, page = u.do("POST", "/ui/resolve/confirm", right)
	require.Contains(t, page, `class="agrees">Checked: the target holds `+object+` for this key.`)
	require.NotContains(t, page, `id="override"`)
	right.Set("confirm", "yes")
	code, _ = u.do("POST", "/ui/resolve", right)
	require.Equal(t, http.StatusSeeOther, code)
	rec, err = st.Get(ctx, madeKey)
	require.NoError(t, err)
	require.Equal(t, journal.StatusSucceeded, rec.Status)
	require.Equal(t, object, rec.TargetObjectID)
	atts := trail(madeKey)
	require.Equal(t, "payment seen in the YooKassa dashboard", atts[len(atts)-1].Note)

	// No charge for the key: failed_final agrees; an invented id goes
	// through only with the override, and the trail keeps what the lookup
	// said.
	_, page = u.do("POST", "/ui/resolve/confirm", url.Values{"key": {noneKey}, "as": {"failed_final"}, "code": {"operator_resolved"},
		"evidence": {"nothing in the dashboard"}})
	require.Contains(t, page, `class="agrees">Checked: the target holds no object for this key`)
	invented := url.Values{"key": {noneKey}, "as": {"succeeded"}, "object": {"pay-from-the-phone"}, "evidence": {"the shop says it was paid"}, "confirm": {"yes"}}
	code, _ = u.do("POST", "/ui/resolve", invented)
	require.Equal(t, http.StatusConflict, code)
	invented.Set("override", "on")
	code, _ = u.do("POST", "/ui/resolve", invented)
	require.Equal(t, http.StatusSeeOther, code)
	atts = trail(noneKey)
	require.Contains(t, atts[len(atts)-1].Note, "the shop says it was paid [recorded over the target's lookup, which said: The target holds no object for this key")
	require.Equal(t, 1, sb.TotalEffects(), "looking up made nothing")
}
