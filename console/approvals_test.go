package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/console"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

const approverToken = "approver-token-5d1e"

// TestApprovalsPage: a charge waits for a person; a viewer cannot reach
// the Approvals page; an approver sees exactly the significant fields
// (never the free text), and a decision without its CSRF token or without
// the confirmation step records nothing; the confirmed approval is recorded
// under the approver's name and the daemon charges once (the YooKassa
// emulator's ledger).
func TestApprovalsPage(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
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
		ns := natstest.Start(t)
		nc, js := ns.Connect(t)
		ncfg := consumer.Config{AckWait: 5 * time.Second, FetchWait: 100 * time.Millisecond}.WithDefaults()
		cons, err := consumer.Ensure(ctx, js, ncfg)
		require.NoError(t, err)
		require.NoError(t, consumer.EnsureParked(ctx, js, ncfg, time.Hour))
		sb := sbyookassa.New(sbyookassa.Options{Options: sandbox.Options{MaxHang: 10 * time.Second}})
		_, err = sb.Start("")
		require.NoError(t, err)
		t.Cleanup(func() { _ = sb.Close() })
		shop, secret := sb.Credentials()
		yk, err := yookassa.New(yookassa.Config{BaseURL: sb.URL(), ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)},
			HTTPConfig: adapters.HTTPConfig{Timeout: 5 * time.Second}})
		require.NoError(t, err)
		policy, err := operation.CompileApprovalPolicy(nil, nil)
		require.NoError(t, err)
		w, err := worker.New(worker.Config{Owner: "w1", LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second,
			Retry: worker.RetryPolicy{InLease: 2 * time.Second, InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond}}, ncfg,
			worker.Deps{Store: st, JS: js, NC: nc, Consumer: cons, Decoder: &operation.Decoder{Env: "test"},
				Adapters:  map[string]adapters.Adapter{"payment.charge": yk},
				Approvals: &worker.Approvals{Policy: policy, NATS: ncfg, URL: func(k string) string { return "http://console.example/ui/approval?key=" + url.QueryEscape(k) }}})
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		t.Cleanup(w.Stop)
		sw := worker.NewApprovalSweeper(worker.ApprovalSweeperConfig{Interval: time.Hour}, st, js, ncfg, nil, nil)
		require.NoError(t, sw.Start(ctx))
		t.Cleanup(sw.Stop)

		cfg := console.Config{Enabled: true, Users: []console.User{
			{Name: "alice", Role: console.RoleOperator, TokenSHA256: console.HashToken(operatorToken)},
			{Name: "victor", Role: console.RoleViewer, TokenSHA256: console.HashToken(viewerToken)},
			{Name: "petra", Role: console.RoleApprover, TokenSHA256: console.HashToken(approverToken)},
		}}
		c, err := console.New(cfg, console.Deps{Store: struct{ console.Journal }{st}, Env: "test", Types: []string{"payment.charge"},
			Resolve: func(ctx context.Context, r journal.Resolution) (journal.Record, error) {
				return worker.Resolve(ctx, worker.Deps{Store: st}, r)
			},
			Approvals: &approval.Service{Store: st, Policy: policy}, Decided: sw.Nudge})
		require.NoError(t, err)
		f := &fixture{srv: httptestServer(t, c), store: st}

		// The charge: it waits, nothing charged.
		const key = "test:payment.charge:console-appr-1:v1"
		body, err := json.Marshal(operation.Command{EventID: "console-appr-1", Operation: "payment.charge",
			Payload: json.RawMessage(`{"account_id":"merchant-account-17","order_id":"order-77","amount_minor":125000,"currency":"RUB"}`)})
		require.NoError(t, err)
		m := natsMsg(wire.CommandSubject("payment.charge"), body)
		m.Header.Set(wire.HeaderRequester, "agent:orders-bot")
		_, err = js.PublishMsg(ctx, m)
		require.NoError(t, err)
		waitUntil(t, "the charge to await approval", func() bool {
			rec, err := st.Get(ctx, key)
			return err == nil && rec.Status == journal.StatusAwaitingApproval
		})
		require.Zero(t, sb.Effects(key))

		// A viewer is refused the page and a decision; an operator without
		// approver: true too.
		viewer := f.client(t)
		require.Equal(t, http.StatusSeeOther, viewer.login(viewerToken))
		code, page, _ := viewer.do("GET", "/ui/approval?key="+url.QueryEscape(key), nil)
		require.Equal(t, http.StatusForbidden, code)
		require.Contains(t, page, "not an approver")
		_, home, _ := viewer.do("GET", "/ui/", nil)
		require.NotContains(t, home, "nav-approvals")
		code, _, _ = viewer.do("POST", "/ui/approval", url.Values{"csrf": {csrfOf(t, home)}, "key": {key}, "vote": {"approve"},
			"reason": {"x"}, "confirm": {"yes"}})
		require.Equal(t, http.StatusForbidden, code)
		op := f.client(t)
		require.Equal(t, http.StatusSeeOther, op.login(operatorToken))
		code, _, _ = op.do("GET", "/ui/approvals", nil)
		require.Equal(t, http.StatusForbidden, code)

		// The approver: the queue, the request's fields, never free text.
		ap := f.client(t)
		require.Equal(t, http.StatusSeeOther, ap.login(approverToken))
		code, page, _ = ap.do("GET", "/ui/approvals", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, key)
		require.Contains(t, page, "nav-approvals")
		code, page, _ = ap.do("GET", "/ui/approval?key="+url.QueryEscape(key), nil)
		require.Equal(t, http.StatusOK, code)
		for _, want := range []string{"payment.charge", "payments", "125000", "RUB", "merchant-account-17", "order-77"} {
			require.Contains(t, page, want)
		}
		a, err := st.Approval(ctx, key)
		require.NoError(t, err)
		form := url.Values{"key": {key}, "fingerprint": {a.RequestHash}, "vote": {"approve"}, "reason": {"order 77 confirmed by phone"}}

		// No CSRF token: refused, nothing recorded.
		code, _, _ = ap.do("POST", "/ui/approval/confirm", form)
		require.Equal(t, http.StatusForbidden, code)
		form.Set("confirm", "yes")
		code, _, _ = ap.do("POST", "/ui/approval", form)
		require.Equal(t, http.StatusForbidden, code)
		form.Del("confirm")
		// The confirmation step shows the decision; skipping it is refused.
		form.Set("csrf", csrfOf(t, page))
		code, confirm, _ := ap.do("POST", "/ui/approval/confirm", form)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, confirm, "Confirm: approve")
		require.Contains(t, confirm, "order 77 confirmed by phone")
		code, _, _ = ap.do("POST", "/ui/approval", form)
		require.Equal(t, http.StatusBadRequest, code, "not confirmed")
		// Another fingerprint than the one waiting: refused.
		stale := url.Values{}
		for k, v := range form {
			stale[k] = v
		}
		stale.Set("fingerprint", strings.Repeat("0", 64))
		stale.Set("confirm", "yes")
		code, page, _ = ap.do("POST", "/ui/approval", stale)
		require.Equal(t, http.StatusBadRequest, code)
		require.Contains(t, page, "request changed")
		a, err = st.Approval(ctx, key)
		require.NoError(t, err)
		require.Empty(t, a.Votes, "nothing recorded so far")
		require.Zero(t, sb.Effects(key))

		// Confirmed: recorded under petra's name; one charge.
		form.Set("confirm", "yes")
		code, _, h := ap.do("POST", "/ui/approval", form)
		require.Equal(t, http.StatusSeeOther, code)
		require.Contains(t, h.Get("Location"), "/ui/approvals?decided=")
		a, err = st.Approval(ctx, key)
		require.NoError(t, err)
		require.Equal(t, journal.ApprovalApproved, a.State)
		require.Len(t, a.Votes, 1)
		require.Equal(t, "petra", a.Votes[0].Approver)
		require.Equal(t, "order 77 confirmed by phone", a.Votes[0].Reason)
		waitUntil(t, "the approved charge to execute", func() bool {
			rec, err := st.Get(ctx, key)
			return err == nil && rec.Status == journal.StatusSucceeded
		})
		require.Equal(t, 1, sb.Effects(key), "one charge after the approval")
		// The operation's page shows the request and the decision: who,
		// when, why, and the fingerprint it covers.
		code, page, _ = ap.do("GET", "/ui/operation?key="+url.QueryEscape(key), nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, `id="op-approval"`)
		require.Contains(t, page, "approval-approved")
		require.Contains(t, page, "1 of 1 approvals")
		require.Contains(t, page, "<td>petra</td><td>approve</td><td>order 77 confirmed by phone</td>")
		require.Contains(t, page, a.RequestHash)
		require.Contains(t, page, `id="op-approval-link"`)
		// Approving again is refused with the reason, and charges nothing.
		form.Set("reason", "again")
		code, page, _ = ap.do("POST", "/ui/approval", form)
		require.Equal(t, http.StatusBadRequest, code)
		require.Contains(t, page, "approved already")
		require.Equal(t, 1, sb.Effects(key))
	})
}

func httptestServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func natsMsg(subject string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	return m
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
