package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/operation"
)

// TestFacesOfferOnlyRoutedTypes: a daemon routing payment.charge alone
// offers MCP agents that tool (beside get_operation and list_unresolved),
// and the HTTP API answers a call of another registered type at once, 404
// operation_not_routed with human_review — never pending for a command no
// replica here would take.
func TestFacesOfferOnlyRoutedTypes(t *testing.T) {
	gd := startGatewayDaemon(t, func(c *Config) {
		c.MCP.Listener = faceConfig{Enabled: true, Addr: "127.0.0.1:0", MaxBody: 1 << 20}
		c.HTTPAPI = faceConfig{Enabled: true, Addr: "127.0.0.1:0", MaxBody: 64 << 10}
		c.Gateway.Wait = 2 * time.Second // a call left waiting would answer pending
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: "http://" + gd.d.faces.mcpAddr + "/mcp", DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	require.ElementsMatch(t, []string{"payment_charge", "get_operation", "list_unresolved"}, names)

	req, err := http.NewRequest(http.MethodPost, "http://"+gd.d.faces.httpAddr+"/v1/operations/invoice.create",
		strings.NewReader(`{"order_id":"o-1","customer_id":"c-1","amount_minor":100,"currency":"RUB"}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", `"inv-1"`)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var problem struct {
		Type   string         `json:"type"`
		Answer gateway.Answer `json:"answer"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&problem))
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "%+v", problem)
	require.Equal(t, "urn:idemgate:problem:not-routed", problem.Type)
	require.Equal(t, gateway.CodeNotRouted, problem.Answer.ErrorCode)
	require.Equal(t, gateway.HumanReview, problem.Answer.NextAction)
}

// TestGatewayWaitCoversACallAndItsLookup: left unset, gateway.wait covers
// a call and the lookup of its lost answer, each bounded by
// worker.call_timeout (never call_timeout alone, which answered pending a
// moment before the lookup settled it), within max_wait; set, it is kept.
func TestGatewayWaitCoversACallAndItsLookup(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(flagsWith(t))
	require.NoError(t, err)
	g := c.gatewayConfig()
	require.Equal(t, 10*time.Second, c.Worker.CallTimeout)
	require.Equal(t, 22*time.Second, g.Wait, "a call, its lookup and 2 s for the way back")
	require.Greater(t, g.Wait, 2*c.Worker.CallTimeout)

	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "worker:\n  call_timeout: 4s\n")))
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, c.gatewayConfig().Wait)

	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "worker:\n  call_timeout: 30s\n  lease_ttl: 40s\nnats:\n  ack_wait: 90s\n")))
	require.NoError(t, err)
	require.Equal(t, time.Minute, c.gatewayConfig().Wait, "at most max_wait")
	require.NoError(t, c.validate())

	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "gateway:\n  wait: 5s\n")))
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, c.gatewayConfig().Wait, "an explicit wait is kept")
}

// TestPublishExitCodes: publish --wait exits 0 for succeeded only, and with
// one code of its own for each other status.
func TestPublishExitCodes(t *testing.T) {
	t.Parallel()
	codes := map[int]operation.ResultStatus{}
	for _, s := range []operation.ResultStatus{operation.ResultSucceeded, operation.ResultFailedFinal, operation.ResultConflict,
		operation.ResultRejected, operation.ResultPending} {
		code := resultExit(s)
		require.NotContains(t, codes, code, "%s shares exit %d with %s", s, code, codes[code])
		codes[code] = s
		require.NotContains(t, []int{exitFailure, exitUsage, exitConfig, exitMigrationsPending, exitUnknown}, code, "%s: a code of its own", s)
	}
	require.Equal(t, exitOK, resultExit(operation.ResultSucceeded))

	row := ""
	for _, line := range strings.Split(readmeSection(t, docPage(t, "operating.md"), "Commands"), "\n") {
		if strings.HasPrefix(line, "| `idemgate publish") {
			row = line
		}
	}
	for code, s := range codes {
		require.Contains(t, row, fmt.Sprintf("%d `%s`", code, s), "docs/operating.md states publish's exit code for %s", s)
	}
}

// TestMCPAllowedOrigins: mcp.allowed_origins defaults to the loopback
// names, is read from the file and the environment, refuses a malformed
// entry at start, and is what the served /mcp admits: another Origin gets
// 403.
func TestMCPAllowedOrigins(t *testing.T) {
	c, err := loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, []string{"http://localhost", "http://127.0.0.1", "http://[::1]"}, c.MCP.AllowedOrigins)

	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "mcp:\n  allowed_origins: [\"https://console.example.com\"]\n")))
	require.NoError(t, err)
	require.Equal(t, []string{"https://console.example.com"}, c.MCP.AllowedOrigins)
	require.NoError(t, c.validate())

	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "mcp:\n  allowed_origins: [\"console.example.com/ui\"]\n")))
	require.NoError(t, err)
	require.ErrorContains(t, c.validate(), `mcp.allowed_origins: "console.example.com/ui": not an origin`)

	t.Setenv("IDEMGATE_MCP_ALLOWED_ORIGINS", "https://a.example,https://b.example:8443")
	c, err = loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, []string{"https://a.example", "https://b.example:8443"}, c.MCP.AllowedOrigins)
	t.Setenv("IDEMGATE_MCP_ALLOWED_ORIGINS", "")

	gd := startGatewayDaemon(t, func(c *Config) {
		c.MCP.Listener = faceConfig{Enabled: true, Addr: "127.0.0.1:0", MaxBody: 1 << 20}
		c.MCP.AllowedOrigins = []string{"https://console.example.com"}
	})
	post := func(origin string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+gd.d.faces.mcpAddr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post("http://localhost:6274"), "not on this deployment's list")
	require.Equal(t, http.StatusForbidden, post("http://rebind.attacker.example:8090"))
	require.NotEqual(t, http.StatusForbidden, post("https://console.example.com"))
	require.NotEqual(t, http.StatusForbidden, post(""))
}

// TestMCPTaskWait: mcp.task_wait and gateway.task_ttl default to 2s and
// 24h, are read from the file, and a task wait past gateway.max_wait is
// refused at start.
func TestMCPTaskWait(t *testing.T) {
	c, err := loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, c.MCP.TaskWait)
	require.Equal(t, 24*time.Hour, c.gatewayConfig().TaskTTL)

	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "mcp:\n  task_wait: 500ms\ngateway:\n  task_ttl: 2h\n")))
	require.NoError(t, err)
	require.Equal(t, 500*time.Millisecond, c.MCP.TaskWait)
	require.Equal(t, 2*time.Hour, c.gatewayConfig().TaskTTL)
	require.NoError(t, c.validate())

	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "mcp:\n  task_wait: 2m\n")))
	require.NoError(t, err)
	require.ErrorContains(t, c.validate(), "mcp.task_wait 2m0s: must be positive and at most gateway.max_wait (1m0s)")

	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "gateway:\n  task_ttl: 10s\n")))
	require.NoError(t, err)
	require.ErrorContains(t, c.validate(), "gateway.task_ttl 10s: at least 1m")
}
