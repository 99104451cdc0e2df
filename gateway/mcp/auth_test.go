package mcp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/redact"
)

// TestHTTPTransportTellsAWrongTokenFromNone: over Streamable HTTP, a
// request without a bearer token is told one is required; one with a wrong
// token is told it is not accepted and where the right one is configured,
// with RFC 6750's invalid_token — never quoting what was sent.
func TestHTTPTransportTellsAWrongTokenFromNone(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{}, nil)
	srv, err := gwmcp.NewServer(b.g, gwmcp.Options{Version: "test"})
	require.NoError(t, err)
	hs := httptest.NewServer(gwmcp.Handler(srv, gwmcp.HTTPOptions{Token: redact.Secret("the-right-token")}))
	t.Cleanup(hs.Close)
	for auth, want := range map[string][2]string{
		"":                          {"a bearer token is required", `Bearer realm="idemgate"`},
		"Basic dXNlcjpwYXNz":        {"a bearer token is required", `Bearer realm="idemgate"`},
		"Bearer a-wrong-token-4242": {"the bearer token is not accepted", `Bearer realm="idemgate", error="invalid_token"`},
	} {
		req, err := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, auth)
		require.Contains(t, strings.ToLower(string(body)), want[0], auth)
		require.Equal(t, want[1], resp.Header.Get("WWW-Authenticate"), auth)
		require.NotContains(t, string(body), "a-wrong-token", auth)
		if strings.HasPrefix(auth, "Bearer") {
			require.Contains(t, string(body), "mcp.token")
		}
	}
}
