package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestApprovalTokenKeysRefusedAtStart: a bad approval token key (missing,
// too short, a private key where the public one belongs, an unset
// variable) stops `idemgate run` with exit 78 naming the key, never
// printing a key's bytes.
func TestApprovalTokenKeysRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.key")
	require.NoError(t, os.WriteFile(short, []byte("tiny-secret-abc"), 0o600))
	priv := filepath.Join(dir, "priv.pem")
	require.NoError(t, os.WriteFile(priv, []byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----\n"), 0o600))
	for name, tc := range map[string]struct{ issuer, want string }{
		"short secret": {"{name: shop.example, alg: HS256, key_file: " + short + "}", "at least 32"},
		"private key":  {"{name: shop.example, alg: EdDSA, key_file: " + priv + "}", "not a PEM PUBLIC KEY"},
		"unset env":    {"{name: shop.example, alg: HS256, key_env: IDEMGATE_TEST_NO_SUCH_SECRET}", "key_env IDEMGATE_TEST_NO_SUCH_SECRET is unset"},
		"missing file": {"{name: shop.example, alg: HS256, key_file: " + filepath.Join(dir, "none") + "}", "key_file"},
		"bad alg":      {"{name: shop.example, alg: none, key_file: " + short + "}", "EdDSA or HS256"},
	} {
		p := writeConfig(t, "env: test\napprovals:\n  enabled: true\n  tokens:\n    issuers:\n      - "+tc.issuer+"\n")
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "--config", p}, &bytes.Buffer{}, &stderr)
		require.Equal(t, exitConfig, code, "%s: %s", name, stderr.String())
		require.Contains(t, stderr.String(), "approvals.tokens.issuers[0]", name)
		require.Contains(t, stderr.String(), tc.want, name)
		require.NotContains(t, stderr.String(), "tiny-secret-abc", name)
		require.NotContains(t, stderr.String(), "MC4CAQAw", name)
	}
	// With approvals off the tokens are not used, and their keys not read.
	good := filepath.Join(dir, "good.key")
	require.NoError(t, os.WriteFile(good, []byte(strings.Repeat("s", 40)), 0o600))
	off, err := loadConfig(flagsWith(t, "--config", writeConfig(t, "env: test\napprovals:\n  enabled: false\n  tokens:\n    issuers:\n      - {name: shop.example, alg: HS256, key_env: IDEMGATE_TEST_NO_SUCH_SECRET}\n")))
	require.NoError(t, err)
	require.NoError(t, off.validate())
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, "env: test\napprovals:\n  enabled: true\n  tokens:\n    issuers:\n      - {name: shop.example, alg: HS256, key_file: "+good+"}\n")))
	require.NoError(t, err)
	require.NoError(t, c.validate())
}

// TestApprovalLinkDefaults: the link of a waiting intent is the console's
// approval page under approvals.base_url, else under the admin listener
// when the console is on; approvals.url, a prefix of one's own, wins.
func TestApprovalLinkDefaults(t *testing.T) {
	c := defaults()
	require.Nil(t, c.approvalLinks(), "no console, no base_url: no link")
	c.Console.Enabled = true
	require.Equal(t, "http://127.0.0.1:8081/ui/approval?key=prod%3Apayment.charge%3Ao-1%3Av1", c.approvalLinks()("prod:payment.charge:o-1:v1"))
	c.Approvals.BaseURL = "https://idemgate.example/"
	require.Equal(t, "https://idemgate.example/ui/approval?key=prod%3Apayment.charge%3Ao-1%3Av1", c.approvalLinks()("prod:payment.charge:o-1:v1"))
	c.Approvals.URL = "https://portal.example/approve/"
	require.Equal(t, "https://portal.example/approve/prod:payment.charge:o-1:v1", c.approvalLinks()("prod:payment.charge:o-1:v1"))
}
