package mcp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
)

// TestStreamableHTTPChecksOrigin: the Streamable HTTP endpoint refuses
// with 403 a request whose Origin header is present and not allowed (a
// DNS-rebinding page keeps its own origin), before the token is even
// looked at; a request without Origin, or from an allowed one, is served.
// By default the loopback names are allowed, on any port.
func TestStreamableHTTPChecksOrigin(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{}, nil)
	srv, err := gwmcp.NewServer(b.g, gwmcp.Options{})
	require.NoError(t, err)
	const token = "origin-test-token"
	// A call outside any session: the SDK answers it (400), so a request
	// that passed the guards leaves no session behind.
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	status := func(h http.Handler, origins []string, auth bool) int {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8090/mcp", strings.NewReader(list))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for _, o := range origins {
			req.Header.Add("Origin", o)
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	def := gwmcp.Handler(srv, gwmcp.HTTPOptions{Token: token})
	served := status(def, nil, true) // no Origin: not a browser
	require.NotContains(t, []int{http.StatusForbidden, http.StatusUnauthorized}, served, "the SDK answered it")
	require.Equal(t, http.StatusUnauthorized, status(def, nil, false))
	require.Equal(t, served, status(def, []string{"http://localhost:6274"}, true))
	require.Equal(t, served, status(def, []string{"http://127.0.0.1:8090"}, true))
	require.Equal(t, served, status(def, []string{"http://[::1]:3000"}, true))
	require.Equal(t, http.StatusForbidden, status(def, []string{"http://rebind.attacker.example:8090"}, true))
	require.Equal(t, http.StatusForbidden, status(def, []string{"http://rebind.attacker.example:8090"}, false), "refused before the token")
	require.Equal(t, http.StatusForbidden, status(def, []string{"null"}, true))
	require.Equal(t, http.StatusForbidden, status(def, []string{"https://localhost:6274"}, true), "another scheme is another origin")
	require.Equal(t, http.StatusForbidden, status(def, []string{"http://localhost:1", "http://localhost:2"}, true), "two Origin headers")

	custom := gwmcp.Handler(srv, gwmcp.HTTPOptions{Token: token, AllowedOrigins: []string{"https://Console.Example.com:8443"}})
	require.Equal(t, served, status(custom, []string{"https://console.example.com:8443"}, true))
	require.Equal(t, http.StatusForbidden, status(custom, []string{"https://console.example.com"}, true))
	require.Equal(t, http.StatusForbidden, status(custom, []string{"http://localhost:6274"}, true), "the list replaces the default")

	none := gwmcp.Handler(srv, gwmcp.HTTPOptions{Token: token, AllowedOrigins: []string{}})
	require.Equal(t, http.StatusForbidden, status(none, []string{"http://localhost:6274"}, true))
	require.Equal(t, served, status(none, nil, true))

	any := gwmcp.Handler(srv, gwmcp.HTTPOptions{Token: token, AllowedOrigins: []string{"*"}})
	require.Equal(t, served, status(any, []string{"http://rebind.attacker.example:8090"}, true))

	require.NoError(t, gwmcp.ValidateOrigins([]string{"*", "http://localhost", "https://a.example:8443", "chrome-extension://abcdef"}))
	for _, bad := range []string{"localhost", "http://a.example/path", "http://", "https://a.example?x=1", "http://user@a.example"} {
		require.Error(t, gwmcp.ValidateOrigins([]string{bad}), bad)
	}
}
