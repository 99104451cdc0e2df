package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/worker"
)

// receiver is a chat bridge's endpoint: it fails the first POST, then
// accepts, and keeps what it was sent.
type receiver struct {
	mu    sync.Mutex
	posts []post
}

type post struct {
	code      int
	delivery  string
	signature string
	body      []byte
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	code := http.StatusOK
	if len(r.posts) == 0 {
		code = http.StatusInternalServerError
	}
	r.posts = append(r.posts, post{code: code, delivery: req.Header.Get(worker.HeaderDelivery), signature: req.Header.Get(worker.HeaderSignature), body: body})
	w.WriteHeader(code)
}

func (r *receiver) all() []post {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]post(nil), r.posts...)
}

// TestApprovalRequestAnnouncedOnce: three copies of a charge that waits for
// a person are announced by one notification, delivered as a signed POST
// and retried after the receiver's 500 with the same delivery id; the body
// holds the masked request and the approval link; nothing else is sent.
func TestApprovalRequestAnnouncedOnce(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, engine string) {
		b, _, _ := approvalSetup(t, engine)
		rcv := &receiver{}
		srv := httptest.NewServer(rcv)
		t.Cleanup(srv.Close)
		const secret = "notify-secret-0123456789abcdef-0123456789"
		cons, err := consumer.EnsureNotify(context.Background(), b.js, b.ncfg, 2*time.Hour, time.Hour, 5*time.Second, 5)
		require.NoError(t, err)
		b.approvals.Notify = true
		n := worker.NewNotifier(worker.NotifierConfig{URL: srv.URL + "/hooks/approvals", Secret: secret}, cons, nil, nil)
		require.NoError(t, n.Start(context.Background()))
		t.Cleanup(n.Stop)
		b.worker(t, "w1", worker.Config{})

		const key = "test:payment.charge:evt-notify:v1"
		for range 3 {
			publishAs(t, b, charge("evt-notify", "order-n", 125000), "agent:orders-bot")
		}
		b.awaitPending(t, key, 3)
		deadline := time.Now().Add(30 * time.Second)
		for len(rcv.all()) < 2 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(1500 * time.Millisecond) // room for a wrong second notification or retry
		posts := rcv.all()
		require.Len(t, posts, 2, "one notification: the failed POST and its retry")
		require.Equal(t, http.StatusInternalServerError, posts[0].code)
		require.Equal(t, http.StatusOK, posts[1].code)
		require.Equal(t, posts[0].delivery, posts[1].delivery, "a retry is the same delivery")
		require.Equal(t, posts[0].body, posts[1].body)
		for _, p := range posts {
			ts, _, ok := strings.Cut(strings.TrimPrefix(p.signature, "t="), ",")
			require.True(t, ok, p.signature)
			unix, err := strconv.ParseInt(ts, 10, 64)
			require.NoError(t, err)
			require.Equal(t, worker.SignNotification([]byte(secret), time.Unix(unix, 0), p.body), p.signature, "signed with the shared secret")
			require.NotEqual(t, worker.SignNotification([]byte("another-secret-0123456789abcdef-012345"), time.Unix(unix, 0), p.body), p.signature)
		}
		var got worker.ApprovalNotification
		require.NoError(t, json.Unmarshal(posts[1].body, &got))
		require.Equal(t, "approval.requested", got.Type)
		require.Equal(t, key, got.OperationKey)
		require.Equal(t, "https://idemgate.example/ui/approvals/"+key, got.URL)
		require.Equal(t, "agent:orders-bot", got.RequestedBy)
		require.Equal(t, 1, got.Approvers)
		require.True(t, got.ExpiresAt.After(got.RequestedAt))
		require.JSONEq(t, `{"operation":"payment.charge","target_system":"payments","account_id":"merchant-account-17",
			"order_id":"order-n","amount_minor":125000,"currency":"RUB"}`, string(got.Request))
		effects, calls := b.target.count(key)
		require.Zero(t, effects+calls, "a notification executes nothing")
	})
}
