package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/gateway/httpapi"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// shopSecret is the HS256 key the test's issuer ("shop.example") signs with.
const shopSecret = "the-shop-signs-its-approvals-with-this-32-byte-key"

// mintFor signs an approval token for the charge the HTTP API makes of
// (intent, body): the claims name its operation, key and fingerprint, as
// the business's own system would after its customer pressed "Pay".
func mintFor(t *testing.T, intent, body, jti string, secret string) string {
	t.Helper()
	op, err := (&operation.Decoder{Env: daemontest.Env}).DecodeCommand(operation.Command{
		EventID: intent, Operation: "payment.charge", IntentID: intent, Payload: json.RawMessage(body)})
	require.NoError(t, err)
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, approval.TokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "shop.example", ID: jti,
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(10 * time.Minute))},
		Operation: op.Type, OperationKey: op.Key.String(), Fingerprint: op.Fingerprint,
	}).SignedString([]byte(secret))
	require.NoError(t, err)
	return s
}

// TestHTTPApprovalToken: the pre-signed approval travels end to end in the
// Idempotency-Approval header, through the gateway, JetStream and the
// worker, with payment.charge requiring an approval. Counted in the
// YooKassa emulator's ledger, on both journals:
//   - without a token the charge waits (pending, await_approval): nothing
//     charged;
//   - a token minted for another amount, or signed with another key, is
//     refused (rejected, fix_input): nothing charged, and the intent is not
//     spent;
//   - the same intent with its own token executes at once, one charge, and
//     a retry with the token is answered from the journal (no second one).
func TestHTTPApprovalToken(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			v, err := approval.NewVerifier(approval.TokenConfig{Issuers: []approval.TokenIssuer{
				{Name: "shop.example", Alg: approval.AlgHS256, KeyEnv: "SHOP_APPROVAL_KEY"}}},
				func(string) string { return shopSecret })
			require.NoError(t, err)
			d := daemontest.StartWith(t, engine, daemontest.Options{Approvals: true, Tokens: v})
			g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 20 * time.Second}, gateway.Deps{NC: d.NC, Journal: d.Journal})
			require.NoError(t, err)
			t.Cleanup(g.Close)
			srv := httptest.NewServer(httpapi.Handler(g, httpapi.Config{Token: redact.Secret(token), MaxBody: 4096}))
			t.Cleanup(srv.Close)
			b := &bundle{d: d, url: srv.URL}

			// No token: the charge waits for a person.
			waiting := chargeBody("order-wait", 70000)
			r := post(t, b, "payment.charge", "tok-http-wait", waiting)
			require.Equal(t, gateway.StatusPending, r.answer.Status, "%+v", r.answer)
			require.Equal(t, "await_approval", string(r.answer.NextAction), "%+v", r.answer)
			waitKey := r.answer.OperationKey

			body := chargeBody("order-tok", 125000)
			const intent = "tok-http-1"
			for name, tok := range map[string]string{
				"another amount": mintFor(t, intent, chargeBody("order-tok", 125001), "jti-amount", shopSecret),
				"another key":    mintFor(t, intent, body, "jti-key", strings.Repeat("k", 40)),
				"not a token":    "eyJhbGciOiJIUzI1NiJ9.e30.bm90LWEtc2lnbmF0dXJl",
				"another intent": mintFor(t, "tok-http-other", body, "jti-intent", shopSecret),
				"no jti":         mintFor(t, intent, body, "", shopSecret),
			} {
				r := post(t, b, "payment.charge", intent, body, httpapi.HeaderApproval, tok)
				require.Equal(t, gateway.StatusRejected, r.answer.Status, "%s: %d %+v", name, r.code, r.answer)
				require.Equal(t, "fix_input", string(r.answer.NextAction), "%s", name)
				require.GreaterOrEqual(t, r.code, 400, name)
				require.Less(t, r.code, 500, name)
				require.NotContains(t, r.answer.Reason, tok, "%s: the reason never quotes the token", name)
				require.Equal(t, 0, d.YooKassa.TotalEffects(), "%s: nothing charged", name)
			}

			// The intent was not spent: with its own token it executes now.
			good := mintFor(t, intent, body, "jti-good", shopSecret)
			r = post(t, b, "payment.charge", intent, body, httpapi.HeaderApproval, good)
			require.Equal(t, http.StatusOK, r.code, "%+v", r.answer)
			require.Equal(t, gateway.StatusSucceeded, r.answer.Status, "%+v", r.answer)
			require.NotEmpty(t, r.answer.TargetObjectID)
			require.Equal(t, 1, d.YooKassa.TotalEffects())

			again := post(t, b, "payment.charge", intent, body, httpapi.HeaderApproval, good)
			require.Equal(t, gateway.StatusSucceeded, again.answer.Status, "%+v", again.answer)
			require.True(t, again.answer.Replayed)
			require.Equal(t, r.answer.TargetObjectID, again.answer.TargetObjectID)
			require.Equal(t, 1, d.YooKassa.TotalEffects(), "a retry with the token charges nothing more")

			// The waiting charge is still waiting: a token for another
			// intent approved nothing else.
			w := get(t, b, "/v1/operations/"+waitKey)
			require.Equal(t, gateway.StatusPending, w.answer.Status, "%+v", w.answer)
			require.Equal(t, "await_approval", string(w.answer.NextAction))
			require.Equal(t, 1, d.YooKassa.TotalEffects())
		})
	}
}
