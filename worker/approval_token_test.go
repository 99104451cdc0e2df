package worker_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/worker"
)

// tokenKit is an issuer ("shop.example", Ed25519) the daemon trusts, and a
// key it does not.
type tokenKit struct {
	priv, stranger ed25519.PrivateKey
	verifier       *approval.Verifier
}

func newTokenKit(t *testing.T) *tokenKit {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	_, stranger, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "shop.pub")
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600))
	v, err := approval.NewVerifier(approval.TokenConfig{Issuers: []approval.TokenIssuer{
		{Name: "shop.example", Alg: approval.AlgEdDSA, KeyFile: file}}}, nil)
	require.NoError(t, err)
	return &tokenKit{priv: priv, stranger: stranger, verifier: v}
}

// mint signs claims for op with key (the issuer's unless told otherwise).
func (k *tokenKit) mint(t *testing.T, key ed25519.PrivateKey, c approval.TokenClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(key)
	require.NoError(t, err)
	return s
}

// claimsFor are the claims approving op, valid for ten minutes.
func claimsFor(op operation.Operation, jti string) approval.TokenClaims {
	return approval.TokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "shop.example", ID: jti,
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(10 * time.Minute))},
		Operation: op.Type, OperationKey: op.Key.String(), Fingerprint: op.Fingerprint,
	}
}

func chargeOp(t *testing.T, intent string, amount int64) (operation.Command, operation.Operation) {
	t.Helper()
	cmd := operation.Command{EventID: intent, Operation: "payment.charge", IntentID: intent,
		Payload: json.RawMessage(fmt.Sprintf(`{"account_id":"merchant-account-17","order_id":%q,"amount_minor":%d,"currency":"RUB"}`, intent, amount))}
	op, err := (&operation.Decoder{Env: "test"}).DecodeCommand(cmd)
	require.NoError(t, err)
	return cmd, op
}

// TestApprovalTokens: a command carrying a good pre-signed token executes
// at once (one charge in the YooKassa emulator's ledger, 20 concurrent
// copies included), the approval recorded as the issuer's with the jti; a
// token for another amount, intent or operation, an expired one, one from
// an unknown issuer, one signed with another key, and a jti reused for
// another intent are each rejected (invalid_field approval_token, fix_input)
// with nothing charged, and no token appears in the log or the journal.
func TestApprovalTokens(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, engine string) {
		b, _, _ := approvalSetup(t, engine)
		kit := newTokenKit(t)
		b.approvals.Tokens = kit.verifier
		sb, yk := startYooKassa(t)
		var logs syncBuffer
		log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx := context.Background()
		cons, err := consumer.Ensure(ctx, b.js, b.ncfg)
		require.NoError(t, err)
		for _, owner := range []string{"w1", "w2"} {
			w, err := worker.New(worker.Config{Owner: owner, LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second,
				Retry: worker.RetryPolicy{InLease: 2 * time.Second, InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond}}, b.ncfg, worker.Deps{
				Store: b.store, JS: b.js, NC: b.nc, Consumer: cons, Decoder: &operation.Decoder{Env: "test"},
				Adapters: map[string]adapters.Adapter{"payment.charge": yk, "payment.refund": yk}, Approvals: b.approvals, Log: log,
			})
			require.NoError(t, err)
			require.NoError(t, w.Start(ctx))
			t.Cleanup(w.Stop)
		}
		var tokens []string
		send := func(cmd operation.Command, token string) {
			cmd.ApprovalToken = token
			tokens = append(tokens, token)
			body, err := json.Marshal(cmd)
			require.NoError(t, err)
			publishAs(t, b, body, "agent:orders-bot")
		}

		// The good token: executes at once, one charge; 20 concurrent copies
		// with the same token make no second one.
		cmd, op := chargeOp(t, "tok-good", 125000)
		good := kit.mint(t, kit.priv, claimsFor(op, "jti-good-1"))
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := cmd
				c.ApprovalToken = good
				body, err := json.Marshal(c)
				if err == nil {
					publishAs(t, b, body, "agent:orders-bot")
				}
			}()
		}
		wg.Wait()
		tokens = append(tokens, good)
		res := b.await(t, op.Key.String(), 1)[0]
		require.Equal(t, operation.ResultSucceeded, res.Status, "%+v", res)
		waitFor(t, 20*time.Second, "the copies to settle", func() (bool, string) {
			rec, err := b.store.Get(ctx, op.Key.String())
			return err == nil && rec.Status == journal.StatusSucceeded, fmt.Sprint(rec.Status, err)
		})
		require.Equal(t, 1, sb.Effects(op.Key.String()), "one charge for 20 copies with a good token")
		a, err := b.store.Approval(ctx, op.Key.String())
		require.NoError(t, err)
		require.Equal(t, journal.ApprovalApproved, a.State)
		require.Len(t, a.Votes, 1)
		require.Equal(t, "shop.example", a.Votes[0].Approver, "decided by the issuer")
		require.Equal(t, "jti-good-1", a.Votes[0].TokenID)
		require.Equal(t, op.Fingerprint, a.Votes[0].RequestHash)

		// Each bad token: rejected, fix_input, nothing charged, no record.
		expired := func(op operation.Operation) approval.TokenClaims {
			c := claimsFor(op, "jti-expired")
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute))
			return c
		}
		cases := []struct {
			name, intent string
			token        func(op operation.Operation) string
			reason       string
		}{
			{"another amount", "tok-amount", func(op operation.Operation) string {
				_, other := chargeOp(t, op.Key.IntentID, 999999)
				return kit.mint(t, kit.priv, claimsFor(other, "jti-amount"))
			}, "approves another request"},
			{"another intent", "tok-intent", func(op operation.Operation) string {
				_, other := chargeOp(t, "tok-other-intent", 125000)
				return kit.mint(t, kit.priv, claimsFor(other, "jti-intent"))
			}, "approves another intent"},
			{"another operation", "tok-op", func(op operation.Operation) string {
				c := claimsFor(op, "jti-op")
				c.Operation = "payment.refund"
				return kit.mint(t, kit.priv, c)
			}, "approves operation payment.refund, not payment.charge"},
			{"expired", "tok-expired", func(op operation.Operation) string {
				return kit.mint(t, kit.priv, expired(op))
			}, "expired at"},
			{"unknown issuer", "tok-issuer", func(op operation.Operation) string {
				c := claimsFor(op, "jti-issuer")
				c.Issuer = "evil.example"
				return kit.mint(t, kit.priv, c)
			}, "issuer (iss) is not one of"},
			{"badly signed", "tok-forged", func(op operation.Operation) string {
				return kit.mint(t, kit.stranger, claimsFor(op, "jti-forged"))
			}, "bad signature"},
			{"HS256 where the issuer signs EdDSA", "tok-alg", func(op operation.Operation) string {
				s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claimsFor(op, "jti-alg")).SignedString([]byte(strings.Repeat("k", 32)))
				require.NoError(t, err)
				return s
			}, "signed with HS256, not the issuer's algorithm"},
			{"jti reused for another intent", "tok-reused", func(op operation.Operation) string {
				return kit.mint(t, kit.priv, claimsFor(op, "jti-good-1"))
			}, "jti already approved another intent"},
			{"garbage", "tok-garbage", func(operation.Operation) string { return "eyJ.not-a.token" }, "not a signed JWT"},
		}
		for _, tc := range cases {
			cmd, op := chargeOp(t, tc.intent, 125000)
			tok := tc.token(op)
			send(cmd, tok)
			r := b.await(t, op.Key.String(), 1)[0]
			require.Equal(t, operation.ResultRejected, r.Status, "%s: %+v", tc.name, r)
			require.Equal(t, string(operation.CodeInvalidField), r.ErrorCode, tc.name)
			require.Contains(t, r.Reason, "approval_token: ", tc.name)
			require.Contains(t, r.Reason, tc.reason, tc.name)
			require.NotContains(t, r.Reason, tok, tc.name)
			require.Zero(t, sb.Effects(op.Key.String()), "%s: nothing charged", tc.name)
			_, err := b.store.Approval(ctx, op.Key.String())
			require.ErrorIs(t, err, journal.ErrNotFound, "%s: no approval recorded", tc.name)
			_, err = b.store.Get(ctx, op.Key.String())
			require.ErrorIs(t, err, journal.ErrNotFound, "%s: nothing in the journal", tc.name)
		}
		// The rejected intent, sent again with a good token, executes once.
		cmd, op = chargeOp(t, "tok-forged", 125000)
		send(cmd, kit.mint(t, kit.priv, claimsFor(op, "jti-fixed")))
		require.Equal(t, operation.ResultSucceeded, b.await(t, op.Key.String(), 1)[0].Status)
		require.Equal(t, 1, sb.Effects(op.Key.String()))
		require.Equal(t, 2, sb.Ledger().Total(), "two charges in all: the good token's and the fixed one's")

		out := logs.String()
		require.Contains(t, out, "approved by a pre-signed token")
		for _, tok := range tokens {
			require.NotContains(t, out, tok, "no token in the log")
		}
	})
}
