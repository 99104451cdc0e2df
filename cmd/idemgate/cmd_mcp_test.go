package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/redact"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// gatewayDaemon is an in-process `idemgate run` on the embedded defaults
// (embedded NATS on a free port, SQLite journal) charging through the
// YooKassa emulator.
type gatewayDaemon struct {
	d   *daemon
	cfg Config
	yk  *sbyookassa.Server
	// stop shuts the daemon down gracefully (at the latest when the test ends).
	stop func()
}

func startGatewayDaemon(t *testing.T, tune func(*Config)) *gatewayDaemon {
	t.Helper()
	yk := sbyookassa.New(sbyookassa.Options{})
	url, err := yk.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = yk.Close() })
	shop, secret := yk.Credentials()
	c := testDefaults()
	c.Env = "test"
	c.DataDir = t.TempDir()
	c.Admin.Addr = ""
	c.NATS.EmbeddedAddr = "127.0.0.1:0"
	c.NATS.FetchWait = 50 * time.Millisecond
	c.Routes = map[string]string{"payment.charge": "yookassa"}
	c.Adapters.YooKassa = &yookassa.Config{BaseURL: url, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}}
	if tune != nil {
		tune(&c)
	}
	require.NoError(t, c.validate())
	d, stop := runUntilStopped(t, c)
	c.NATS.EmbeddedAddr = d.natsAddr // the port it took, for the tools' configuration
	return &gatewayDaemon{d: d, cfg: c, yk: yk, stop: stop}
}

func chargeArguments(intent string, amount int64) map[string]any {
	return map[string]any{"intent_id": intent, "approval_id": "appr-1", "account_id": "merchant-account-17",
		"order_id": "order-" + intent, "amount_minor": amount, "currency": "RUB"}
}

func toolAnswer(t *testing.T, res *sdk.CallToolResult) gateway.Answer {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var a gateway.Answer
	require.NoError(t, json.Unmarshal(b, &a), "%s", b)
	return a
}

// helperArgsEnv carries the arguments of the re-executed test binary.
const helperArgsEnv = "IDEMGATE_TEST_HELPER_ARGS"

// TestHelperProcessMCP is not a test: re-executed by TestMCPStdio with
// helperArgsEnv set, it is the `idemgate` binary (the os/exec pattern).
func TestHelperProcessMCP(t *testing.T) {
	args := os.Getenv(helperArgsEnv)
	if args == "" {
		return
	}
	os.Exit(run(context.Background(), strings.Fields(args), os.Stdout, os.Stderr))
}

// TestMCPStdio: an MCP client launches `idemgate mcp --config …` and talks
// to it over stdin/stdout (the SDK's command transport); the call charges
// once through the running daemon.
func TestMCPStdio(t *testing.T) {
	gd := startGatewayDaemon(t, nil)
	cfgPath := writeConfig(t, fmt.Sprintf("env: test\ndata_dir: %s\nnats:\n  embedded_addr: %s\nlog:\n  level: warn\nroutes: {payment.charge: yookassa}\n",
		gd.cfg.DataDir, gd.cfg.NATS.EmbeddedAddr))
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessMCP$")
	cmd.Env = append(os.Environ(), helperArgsEnv+"=mcp --config "+cfgPath)
	stderr := &lockedWriter{w: &bytes.Buffer{}}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "desktop-client", Version: "1"}, nil).
		Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, stderr.String())

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	require.ElementsMatch(t, []string{"payment_charge", "get_operation", "list_unresolved"}, names,
		"the one routed operation type, get_operation, list_unresolved")
	for range 2 {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "payment_charge", Arguments: chargeArguments("stdio-1", 125000)})
		require.NoError(t, err)
		a := toolAnswer(t, res)
		require.Equal(t, gateway.StatusSucceeded, a.Status, "%+v\n%s", a, stderr.String())
		require.Equal(t, "test:payment.charge:stdio-1:v1", a.OperationKey)
	}
	require.Equal(t, 1, gd.yk.TotalEffects())
	require.NoError(t, cs.Close(), "closing stdin ends the server")
	require.Equal(t, 0, cmd.ProcessState.ExitCode(), stderr.String())
	require.NotContains(t, stderr.String(), "merchant-account-17", "payloads are never logged")
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestRunServesFaces: `run` with mcp.enabled serves Streamable HTTP at
// /mcp, and with http_api.enabled the HTTP API, both behind their bearer
// tokens, onto the same commands.
func TestRunServesFaces(t *testing.T) {
	const token, apiToken = "t0ken-for-mcp-tests", "t0ken-for-the-api"
	gd := startGatewayDaemon(t, func(c *Config) {
		c.MCP.Listener = faceConfig{Enabled: true, Addr: "127.0.0.1:0", Token: token, MaxBody: 1 << 20}
		c.HTTPAPI = faceConfig{Enabled: true, Addr: "127.0.0.1:0", Token: apiToken, MaxBody: 64 << 10}
	})
	endpoint := "http://" + gd.d.faces.mcpAddr + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "orchestrator", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	args := chargeArguments("http-1", 5000)
	args["order_id"] = "order-http-1"
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "payment_charge", Arguments: args})
	require.NoError(t, err)
	a := toolAnswer(t, res)
	require.Equal(t, gateway.StatusSucceeded, a.Status, "%+v", a)
	require.Equal(t, 1, gd.yk.TotalEffects())

	for name, header := range map[string]string{"no token": "", "wrong token": "Bearer nope"} {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer", name)
	}

	// The same intent through the HTTP API: the payment MCP made, replayed.
	api := "http://" + gd.d.faces.httpAddr + "/v1/operations/payment.charge"
	body := `{"account_id":"merchant-account-17","order_id":"order-http-1","amount_minor":5000,"currency":"RUB","approval_id":"appr-1"}`
	for _, tc := range []struct {
		auth string
		code int
	}{{"", http.StatusUnauthorized}, {"Bearer " + apiToken, http.StatusOK}} {
		req, err := http.NewRequest(http.MethodPost, api, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", `"http-1"`)
		req.Header.Set("Content-Type", "application/json")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var b gateway.Answer
		if tc.code == http.StatusOK {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&b))
		}
		resp.Body.Close()
		require.Equal(t, tc.code, resp.StatusCode)
		if tc.code == http.StatusOK {
			require.Equal(t, a.TargetObjectID, b.TargetObjectID, "one intent, one payment, whichever face")
			require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
		}
	}
	require.Equal(t, 1, gd.yk.TotalEffects())
}

// TestFacesWithoutTokenRefused: a face on a non-loopback address without a
// bearer token does not start (exit 78); with one, or on loopback, it may.
func TestFacesWithoutTokenRefused(t *testing.T) {
	for _, yaml := range []string{
		"mcp:\n  enabled: true\n  addr: 0.0.0.0:8090\n",
		"http_api:\n  enabled: true\n  addr: ':8091'\n",
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "--config", writeConfig(t, yaml)}, &bytes.Buffer{}, &stderr)
		require.Equal(t, exitConfig, code, yaml)
		require.Contains(t, stderr.String(), "a bearer token is required to serve on a non-loopback address")
	}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"mcp", "--transport", "http", "--addr", "0.0.0.0:0", "--config", writeConfig(t, "env: test\n")}, &bytes.Buffer{}, &stderr)
	require.Equal(t, exitConfig, code)
	require.Contains(t, stderr.String(), "IDEMGATE_MCP_TOKEN")

	t.Setenv("IDEMGATE_MCP_TOKEN", "from-the-environment")
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, "mcp:\n  enabled: true\n  addr: 0.0.0.0:8090\n")))
	require.NoError(t, err)
	require.Equal(t, "from-the-environment", c.MCP.Listener.Token.Reveal())
	require.NoError(t, c.validate(), "a token from the environment is enough")
	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "http_api:\n  enabled: true\n  addr: 127.0.0.1:8091\n")))
	require.NoError(t, err)
	require.NoError(t, c.validate(), "loopback needs no token")

	// The HTTP API the same way: refused on a non-loopback address without
	// a token, accepted with IDEMGATE_HTTP_API_TOKEN.
	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "http_api:\n  enabled: true\n  addr: 0.0.0.0:8091\n")))
	require.NoError(t, err)
	require.ErrorContains(t, c.validate(), "a bearer token is required to serve on a non-loopback address")
	t.Setenv("IDEMGATE_HTTP_API_TOKEN", "api-token-from-the-environment")
	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "http_api:\n  enabled: true\n  addr: 0.0.0.0:8091\n")))
	require.NoError(t, err)
	require.Equal(t, "api-token-from-the-environment", c.HTTPAPI.Token.Reveal())
	require.NoError(t, c.validate(), "a token from the environment is enough")
}

// TestExampleConfigFaces: the example documents the gateway's and the
// faces' keys with their defaults, both off.
func TestExampleConfigFaces(t *testing.T) {
	c, err := loadConfig(flagsWith(t, "--config", "../../configs/idemgate.example.yaml"))
	require.NoError(t, err)
	def := defaults()
	require.Equal(t, def.Gateway, c.Gateway)
	require.Equal(t, def.MCP, c.MCP)
	require.Equal(t, def.HTTPAPI, c.HTTPAPI)
	require.False(t, c.MCP.Listener.Enabled || c.HTTPAPI.Enabled)
	g := c.gatewayConfig()
	require.Equal(t, c.Env, g.Env)
	require.Equal(t, c.Reconciler.ReviewAfter, g.ReviewAfter, "one story: the gateway's human_review follows the reconciler's")
	require.Equal(t, c.Reconciler.IdleAfter, g.IdleAfter)
}

// TestMCPStandaloneHTTP: `idemgate mcp --transport http` serves Streamable
// HTTP at /mcp in front of a running daemon, offering the types the
// shared configuration routes.
func TestMCPStandaloneHTTP(t *testing.T) {
	gd := startGatewayDaemon(t, nil)
	cfgPath := writeConfig(t, fmt.Sprintf("env: test\ndata_dir: %s\nnats:\n  embedded_addr: %s\nmcp:\n  token: standalone-token\nroutes: {payment.charge: yookassa}\n",
		gd.cfg.DataDir, gd.cfg.NATS.EmbeddedAddr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	logs := &lockedWriter{w: &bytes.Buffer{}}
	go func() {
		done <- run(ctx, []string{"mcp", "--transport", "http", "--addr", "127.0.0.1:0", "--config", cfgPath}, &bytes.Buffer{}, logs)
	}()
	addr := loggedAttr(t, logs, "mcp serving", "addr") // the port it took
	client := sdk.NewClient(&sdk.Implementation{Name: "orchestrator", Version: "1"}, nil)
	transport := &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{"standalone-token"}}, DisableStandaloneSSE: true, MaxRetries: -1}
	var cs *sdk.ClientSession
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		cs, err = client.Connect(cctx, transport, nil)
		ccancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "mcp server did not come up: %v", err)
		time.Sleep(50 * time.Millisecond) // polling for the listener, with a deadline
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "payment_charge", Arguments: chargeArguments("standalone-1", 700)})
	require.NoError(t, err)
	require.Equal(t, gateway.StatusSucceeded, toolAnswer(t, res).Status)
	require.Equal(t, 1, gd.yk.TotalEffects())
	require.NoError(t, cs.Close())
	cancel()
	require.Equal(t, exitOK, <-done)
}
