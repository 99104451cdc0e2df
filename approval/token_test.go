package approval_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/operation"
)

const hsSecret = "a-shared-secret-of-at-least-32-bytes!"

func hsVerifier(t testing.TB) *approval.Verifier {
	t.Helper()
	v, err := approval.NewVerifier(approval.TokenConfig{Issuers: []approval.TokenIssuer{
		{Name: "shop.example", Alg: approval.AlgHS256, KeyEnv: "SHOP_SECRET"}}},
		func(k string) string {
			if k == "SHOP_SECRET" {
				return hsSecret
			}
			return ""
		})
	require.NoError(t, err)
	return v
}

func testOp(t testing.TB) operation.Operation {
	t.Helper()
	op, err := (&operation.Decoder{Env: "prod"}).DecodeCommand(operation.Command{EventID: "order-1-charge", Operation: "payment.charge",
		Payload: []byte(`{"account_id":"merchant-account-17","order_id":"order-1","amount_minor":125000,"currency":"RUB"}`)})
	require.NoError(t, err)
	return op
}

func hsToken(t testing.TB, c approval.TokenClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(hsSecret))
	require.NoError(t, err)
	return s
}

func goodClaims(op operation.Operation) approval.TokenClaims {
	return approval.TokenClaims{RegisteredClaims: jwt.RegisteredClaims{Issuer: "shop.example", ID: "pay-7f3a",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(5 * time.Minute))},
		Operation: op.Type, OperationKey: op.Key.String(), Fingerprint: op.Fingerprint}
}

// TestVerifyToken: the claims each refusal names, and a good token.
func TestVerifyToken(t *testing.T) {
	v, op := hsVerifier(t), testOp(t)
	got, err := v.Verify(hsToken(t, goodClaims(op)), op)
	require.NoError(t, err)
	require.Equal(t, "shop.example", got.Issuer)
	require.Equal(t, "pay-7f3a", got.ID)

	for name, tc := range map[string]struct {
		mod  func(*approval.TokenClaims)
		want string
	}{
		"no jti":        {func(c *approval.TokenClaims) { c.ID = "" }, "jti: required"},
		"secret jti":    {func(c *approval.TokenClaims) { c.ID = "4111111111111111" }, "jti: required"},
		"no exp":        {func(c *approval.TokenClaims) { c.ExpiresAt = nil }, "no exp claim"},
		"too long":      {func(c *approval.TokenClaims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(2 * time.Hour)) }, "max_lifetime"},
		"not yet":       {func(c *approval.TokenClaims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Minute)) }, "not valid yet"},
		"no key claim":  {func(c *approval.TokenClaims) { c.OperationKey = "" }, "are required claims"},
		"fingerprint":   {func(c *approval.TokenClaims) { c.Fingerprint = strings.Repeat("0", 64) }, "approves another request"},
		"card in op":    {func(c *approval.TokenClaims) { c.Operation = "4111111111111111" }, "another operation than payment.charge"},
		"other issuer":  {func(c *approval.TokenClaims) { c.Issuer = "other.example" }, "issuer (iss) is not one of"},
		"expired":       {func(c *approval.TokenClaims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Second)) }, "expired at"},
		"another op":    {func(c *approval.TokenClaims) { c.Operation = "payment.refund" }, "approves operation payment.refund"},
		"another key":   {func(c *approval.TokenClaims) { c.OperationKey = "prod:payment.charge:other:v1" }, "another intent"},
		"issuer empty":  {func(c *approval.TokenClaims) { c.Issuer = "" }, "issuer (iss) is not one of"},
		"card in jti 2": {func(c *approval.TokenClaims) { c.ID = "sk_live_abcdefghijklmnop" }, "jti: required"},
	} {
		c := goodClaims(op)
		tc.mod(&c)
		tok := hsToken(t, c)
		_, err := v.Verify(tok, op)
		require.ErrorIs(t, err, approval.ErrToken, name)
		require.ErrorContains(t, err, tc.want, name)
		require.NotContains(t, err.Error(), "4111111111111111", name)
		require.NotContains(t, err.Error(), "sk_live", name)
	}
	// alg none, and a token signed with another secret.
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, goodClaims(op)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	_, err = v.Verify(none, op)
	require.ErrorContains(t, err, "algorithm other than EdDSA or HS256")
	forged, err := jwt.NewWithClaims(jwt.SigningMethodHS256, goodClaims(op)).SignedString([]byte(strings.Repeat("x", 32)))
	require.NoError(t, err)
	_, err = v.Verify(forged, op)
	require.ErrorContains(t, err, "bad signature")
	_, err = v.Verify(strings.Repeat("a", approval.MaxTokenLen+1), op)
	require.ErrorContains(t, err, "longer than")
	require.True(t, approval.LooksLikeToken(hsToken(t, goodClaims(op))))
	require.False(t, approval.LooksLikeToken("appr-1"))
}

// TestVerifierConfig: every bad issuer configuration is refused, naming
// the key and never quoting a key's bytes.
func TestVerifierConfig(t *testing.T) {
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	pubFile := filepath.Join(dir, "pub.pem")
	require.NoError(t, os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600))
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	privFile := filepath.Join(dir, "priv.pem")
	require.NoError(t, os.WriteFile(privFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600))
	shortFile := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(shortFile, []byte("short-secret-xyz"), 0o600))

	_, err = approval.NewVerifier(approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "shop.example", Alg: "EdDSA", KeyFile: pubFile}}}, nil)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		cfg  approval.TokenConfig
		want string
	}{
		"private key":   {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "EdDSA", KeyFile: privFile}}}, "not a PEM PUBLIC KEY"},
		"short secret":  {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "HS256", KeyFile: shortFile}}}, "at least 32"},
		"missing file":  {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "HS256", KeyFile: filepath.Join(dir, "none")}}}, "key_file"},
		"unset env":     {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "HS256", KeyEnv: "NO_SUCH_VAR_X"}}}, "key_env NO_SUCH_VAR_X is unset"},
		"no key":        {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "HS256"}}}, "no key"},
		"both":          {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "HS256", KeyFile: shortFile, KeyEnv: "X"}}}, "both set"},
		"RS256":         {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "RS256", KeyFile: pubFile}}}, "EdDSA or HS256"},
		"bad name":      {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "Shop Example", Alg: "EdDSA", KeyFile: pubFile}}}, "name"},
		"two algs":      {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "EdDSA", KeyFile: pubFile}, {Name: "a", Alg: "HS256", KeyFile: shortFile}}}, "one algorithm"},
		"lifetime":      {approval.TokenConfig{MaxLifetime: 30 * 24 * time.Hour}, "max_lifetime"},
		"leeway":        {approval.TokenConfig{Leeway: time.Hour}, "leeway"},
		"pub as secret": {approval.TokenConfig{Issuers: []approval.TokenIssuer{{Name: "a", Alg: "EdDSA", KeyFile: shortFile}}}, "not a PEM"},
	} {
		_, err := approval.NewVerifier(tc.cfg, func(string) string { return "" })
		require.ErrorIs(t, err, approval.ErrConfig, name)
		require.ErrorContains(t, err, tc.want, name)
		require.NotContains(t, err.Error(), "short-secret-xyz", name)
	}
}

// FuzzParseToken: whatever arrives as a token, Parse neither panics nor
// accepts anything the issuer did not sign, and a refusal quotes nothing
// of the token.
func FuzzParseToken(f *testing.F) {
	v, op := hsVerifier(f), testOp(f)
	good := hsToken(f, goodClaims(op))
	f.Add(good)
	f.Add("eyJhbGciOiJIUzI1NiJ9.eyJ9.x")
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJzaG9wLmV4YW1wbGUifQ.")
	f.Add("..")
	f.Add("")
	f.Add(good[:len(good)-2] + "AA")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Parse(tok)
		if err != nil {
			var te *approval.TokenError
			if !errors.As(err, &te) {
				t.Fatalf("not a TokenError: %T %v", err, err)
			}
			if len(tok) >= 24 && strings.Contains(te.Reason, tok) {
				t.Fatalf("the reason quotes the token: %q", te.Reason)
			}
			return
		}
		// Accepted: it must carry the issuer's valid signature over its
		// claims, and its required claims.
		if c.Issuer != "shop.example" || c.ID == "" || c.ExpiresAt == nil {
			t.Fatalf("accepted without its claims: %+v", c)
		}
		if _, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return []byte(hsSecret), nil }, jwt.WithValidMethods([]string{"HS256"})); err != nil {
			t.Fatalf("accepted a token jwt itself refuses: %v", err)
		}
	})
}

// TestDocsMintExample runs the Python snippet docs/approvals.md gives for
// minting a token and verifies what it prints against the request the page
// describes.
func TestDocsMintExample(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this machine")
	}
	doc, err := os.ReadFile("../docs/approvals.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "<!-- mint-token -->\n")
	require.True(t, ok, "docs/approvals.md holds the mint-token snippet")
	_, rest, ok = strings.Cut(rest, "```python\n")
	require.True(t, ok, "the mint-token snippet is Python")
	snippet, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	cmd := exec.Command(py, "-c", snippet)
	cmd.Env = append(os.Environ(), "SHOP_SECRET="+hsSecret)
	out, err := cmd.Output()
	require.NoError(t, err)
	tok := strings.TrimSpace(string(out))
	require.True(t, approval.LooksLikeToken(tok))
	got, err := hsVerifier(t).Verify(tok, testOp(t))
	require.NoError(t, err, "the documented token approves the documented request")
	require.Equal(t, "shop.example", got.Issuer)
	require.Equal(t, "pay-order-1", got.ID)
	// The same snippet's token does not approve another amount.
	other, err := (&operation.Decoder{Env: "prod"}).DecodeCommand(operation.Command{EventID: "order-1-charge", Operation: "payment.charge",
		Payload: []byte(`{"account_id":"merchant-account-17","order_id":"order-1","amount_minor":125001,"currency":"RUB"}`)})
	require.NoError(t, err)
	_, err = hsVerifier(t).Verify(tok, other)
	require.ErrorContains(t, err, "approves another request")
}
