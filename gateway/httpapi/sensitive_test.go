package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/gateway/httpapi"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
)

// raw sends req and returns its status, headers and body as text.
func raw(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(body)
}

const (
	card    = "4111111111111111"
	spaced  = "4111 1111 1111 1111"
	liveKey = "sk_live_4eC39HqLyjWDarjtT1"
)

// requireNoSecret: no form of the card or the key is in the text.
func requireNoSecret(t *testing.T, text string, msg string) {
	t.Helper()
	for _, s := range []string{card, spaced, "4111%20", "4eC39HqLyjWDarjtT1"} {
		require.NotContains(t, text, s, msg)
	}
}

// TestHTTPHeadersSayWhatIsWrong: a missing, repeated, malformed or
// secret-holding Idempotency-Key each get their own 400, saying which; a
// repeated approval header too. Nothing is published, nothing charged,
// and no body quotes the secret.
func TestHTTPHeadersSayWhatIsWrong(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{})
	good := chargeBody("order-9", 100)
	cases := []struct {
		name    string
		keys    []string
		approvs []string
		kind    string
		says    string
	}{
		{"missing", nil, []string{"a"}, "idempotency-key-missing", "the Idempotency-Key header is missing"},
		{"malformed", []string{`"unterminated`}, []string{"a"}, "idempotency-key-malformed", "the Idempotency-Key header is malformed"},
		{"spaced card", []string{spaced}, []string{"a"}, "idempotency-key-secret", "holds what looks like a card-like number"},
		{"quoted card", []string{`"order-` + card + `"`}, []string{"a"}, "idempotency-key-secret", "holds what looks like a card-like number"},
		{"key", []string{liveKey}, []string{"a"}, "idempotency-key-secret", "holds what looks like a secret token"},
		{"two keys", []string{"dup-1", "dup-2"}, []string{"a"}, "idempotency-key-repeated", "carries 2 Idempotency-Key headers"},
		{"two approvals", []string{"dup-3"}, []string{"a", "b"}, "idempotency-approval-repeated", "carries 2 Idempotency-Approval headers"},
	}
	for _, c := range cases {
		req, err := http.NewRequest(http.MethodPost, b.url+"/v1/operations/payment.charge", strings.NewReader(good))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		for _, k := range c.keys {
			req.Header.Add("Idempotency-Key", k)
		}
		for _, a := range c.approvs {
			req.Header.Add("Idempotency-Approval", a)
		}
		code, _, body := raw(t, req)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", c.name, body)
		require.Contains(t, body, httpapi.ProblemType(c.kind), c.name)
		require.Contains(t, body, c.says, c.name)
		require.Contains(t, body, `"next_action":"fix_input"`, c.name)
		require.NotContains(t, body, "missing or malformed", c.name)
		requireNoSecret(t, body, c.name)
	}
	for _, k := range []string{"dup-1", "dup-2", "dup-3"} {
		_, err := b.d.Journal.Get(context.Background(), "test:payment.charge:"+k+":v1")
		require.Error(t, err, "%s: a refused request is never published", k)
	}
	require.Equal(t, 0, b.d.YooKassa.TotalEffects())
}

// TestHTTPErrorBodiesHoldNoSecret: a card number or a key in the path is
// masked in a problem's instance, and a 401 carries no instance at all; a
// card number or a key in an id field is refused (422) naming the field.
// A wrong token is told apart from a missing one.
func TestHTTPErrorBodiesHoldNoSecret(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{})
	send := func(method, path, auth, body string) (int, http.Header, string) {
		req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		req.Header.Set("Idempotency-Key", "sec-1")
		req.Header.Set("Idempotency-Approval", "appr-1")
		return raw(t, req)
	}
	for _, path := range []string{"/v1/operations/test:payment.charge:" + card + ":v1", "/v1/operations/" + strings.ReplaceAll(spaced, " ", "%20"),
		"/v1/operations/" + liveKey, "/" + card} {
		code, _, body := send(http.MethodGet, path, "Bearer "+token, "")
		require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, code, "%s: %s", path, body)
		require.Contains(t, body, `"instance":"/`, path)
		requireNoSecret(t, body, path)

		code, _, body = send(http.MethodPost, path, "Bearer wrong", chargeBody("order-1", 100))
		require.Equal(t, http.StatusUnauthorized, code, path)
		require.NotContains(t, body, "instance", path)
		requireNoSecret(t, body, path)
	}

	code, hdr, body := send(http.MethodGet, "/v1/operations/x", "Bearer wrong", "")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, "The bearer token is not accepted")
	require.Contains(t, body, "http_api.token")
	require.NotContains(t, body, "wrong")
	require.Equal(t, `Bearer realm="idemgate", error="invalid_token"`, hdr.Get("WWW-Authenticate"))
	code, hdr, body = send(http.MethodGet, "/v1/operations/x", "", "")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, "A bearer token is required")
	require.Equal(t, `Bearer realm="idemgate"`, hdr.Get("WWW-Authenticate"))

	for field, p := range map[string]string{
		"payload.order_id":   `{"account_id":"merchant-account-17","order_id":"` + card + `","amount_minor":100,"currency":"RUB"}`,
		"payload.account_id": `{"account_id":"` + liveKey + `","order_id":"order-1","amount_minor":100,"currency":"RUB"}`,
	} {
		code, _, body := send(http.MethodPost, "/v1/operations/payment.charge", "Bearer "+token, p)
		require.Equal(t, http.StatusUnprocessableEntity, code, "%s: %s", field, body)
		require.Contains(t, body, field+": contains a ")
		requireNoSecret(t, body, field)
	}
	require.Equal(t, 0, b.d.YooKassa.TotalEffects(), "no card number or key reached YooKassa")
}

// TestHTTPPendingSaysHowToPollOverHTTP: a pending answer's reason is the
// one every face gives (look it up again by its operation_key), naming no
// face's own tool; the Location header gives this face's URL.
func TestHTTPPendingSaysHowToPollOverHTTP(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{Wait: time.Second})
	r := post(t, b, "payment.charge", "poll-1", chargeBody("order-1", 100), "Idempotency-Approval", "a", "Prefer", "wait=0")
	require.Equal(t, http.StatusAccepted, r.code, "%+v", r)
	require.Equal(t, gateway.Poll, r.answer.NextAction)
	require.Contains(t, r.answer.Reason, "look it up again by its operation_key", "the reason every face gives; the Location header names the URL")
	require.NotContains(t, r.answer.Reason, "get_operation")
}
