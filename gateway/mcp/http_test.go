package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
)

// served is a gateway's MCP server on a real HTTP listener.
type served struct {
	d   *daemontest.Daemon
	g   *gateway.Gateway
	url string
}

// serve puts an MCP server for d on Streamable HTTP.
func serve(t *testing.T, d *daemontest.Daemon, cfg gateway.Config, opts gwmcp.Options) *served {
	t.Helper()
	cfg.Env = daemontest.Env
	g, err := gateway.New(cfg, gateway.Deps{NC: d.NC, Journal: d.Journal, Cancels: d.Journal, Routed: d.Routes, Processes: d.Processes})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv, err := gwmcp.NewServer(g, opts)
	require.NoError(t, err)
	hs := httptest.NewServer(gwmcp.Handler(srv, gwmcp.HTTPOptions{}))
	t.Cleanup(hs.Close)
	return &served{d: d, g: g, url: hs.URL + gwmcp.Path}
}

// TestEachRevisionServed: a client of every revision the SDK knows
// connects to the one endpoint, on that revision — the current one
// without a session, the earlier ones with initialize and a session — and
// charges through it: one payment per intent, the retry replayed.
func TestEachRevisionServed(t *testing.T) {
	s := serve(t, daemontest.Start(t, daemontest.SQLite), gateway.Config{Wait: 20 * time.Second}, gwmcp.Options{})
	require.Equal(t, gwmcp.RevisionCurrent, gwmcp.Revisions()[0])
	require.Contains(t, gwmcp.Revisions(), gwmcp.RevisionLegacy)
	for i, rev := range gwmcp.Revisions() {
		t.Run(rev, func(t *testing.T) {
			ctx := context.Background()
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent-" + rev, Version: "1"}, nil).
				Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.url}, &sdk.ClientSessionOptions{ProtocolVersion: rev})
			require.NoError(t, err)
			defer cs.Close()
			require.Equal(t, rev, cs.InitializeResult().ProtocolVersion, "served on the revision the client speaks")
			if rev >= gwmcp.RevisionCurrent {
				require.Empty(t, cs.ID(), "the current revision has no session")
				require.Contains(t, cs.InitializeResult().Capabilities.Extensions, gwmcp.ExtensionTasks)
			} else {
				require.NotEmpty(t, cs.ID(), "%s keeps its session", rev)
			}
			tools, err := cs.ListTools(ctx, nil)
			require.NoError(t, err)
			require.NotEmpty(t, tools.Tools)
			intent := fmt.Sprintf("rev-%d", i)
			first := call(t, cs, "payment_charge", chargeArgs(intent, "order-"+intent, 1000))
			require.Equal(t, gateway.StatusSucceeded, first.Status, "%+v", first)
			again := call(t, cs, "payment_charge", chargeArgs(intent, "order-"+intent, 1000))
			require.True(t, again.Replayed)
			require.Equal(t, first.TargetObjectID, again.TargetObjectID)
		})
	}
	require.Equal(t, len(gwmcp.Revisions()), s.d.YooKassa.TotalEffects(), "one payment per intent, whatever the revision")
}

// TestRevisionChosenPerRequest: the current revision's requests are served
// without a session even beside a live session of an earlier one; a
// revision that is not served, and a header that contradicts the body,
// are refused 400 with the current revision's JSON-RPC errors.
func TestRevisionChosenPerRequest(t *testing.T) {
	s := serve(t, daemontest.Start(t, daemontest.SQLite), gateway.Config{}, gwmcp.Options{})

	legacy, err := sdk.NewClient(&sdk.Implementation{Name: "old-agent", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: s.url}, &sdk.ClientSessionOptions{ProtocolVersion: gwmcp.RevisionLegacy})
	require.NoError(t, err)
	defer legacy.Close()
	require.NotEmpty(t, legacy.ID())

	resp := post(t, s.url, gwmcp.RevisionCurrent, "tools/list", "", map[string]any{"_meta": meta(gwmcp.RevisionCurrent, false)})
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	require.Empty(t, resp.header.Get("Mcp-Session-Id"), "no session is made for the current revision")
	require.Contains(t, string(resp.result), `"payment_charge"`)

	_, err = legacy.ListTools(context.Background(), nil)
	require.NoError(t, err, "the earlier revision's session lives on")

	unknown := post(t, s.url, "2099-01-01", "tools/list", "", map[string]any{"_meta": meta("2099-01-01", false)})
	require.Equal(t, http.StatusBadRequest, unknown.status)
	require.Equal(t, int64(sdk.CodeUnsupportedProtocolVersion), unknown.err.Code, "%s", unknown.body)
	var data sdk.UnsupportedProtocolVersionData
	require.NoError(t, json.Unmarshal(unknown.err.Data, &data))
	require.Equal(t, gwmcp.Revisions(), data.Supported)

	mismatch := post(t, s.url, gwmcp.RevisionCurrent, "tools/list", "", map[string]any{"_meta": meta(gwmcp.RevisionLegacy, false)})
	require.Equal(t, http.StatusBadRequest, mismatch.status)
	require.Equal(t, int64(sdk.CodeHeaderMismatch), mismatch.err.Code, "%s", mismatch.body)
}

// meta is a request's _meta on the current revision: its version, the
// client and its capabilities (the Tasks extension when tasks is set).
func meta(rev string, tasks bool) map[string]any {
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{gwmcp.ExtensionTasks: map[string]any{}}
	}
	return map[string]any{sdk.MetaKeyProtocolVersion: rev, sdk.MetaKeyClientCapabilities: caps,
		sdk.MetaKeyClientInfo: map[string]any{"name": "raw-agent", "version": "1"}}
}

type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type rpcResponse struct {
	status int
	header http.Header
	body   []byte
	result json.RawMessage
	err    *rpcError
}

// post sends one JSON-RPC request as a client of revision rev does over
// Streamable HTTP (its headers: MCP-Protocol-Version, Mcp-Method, Mcp-Name
// when name is set) and reads the response, JSON or a stream of events.
func post(t *testing.T, url, rev, method, name string, params map[string]any) rpcResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", rev)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	return readRPC(t, res)
}

// readRPC reads a JSON-RPC response, JSON or a stream of events.
func readRPC(t *testing.T, res *http.Response) rpcResponse {
	t.Helper()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := rpcResponse{status: res.StatusCode, header: res.Header, body: raw}
	msg := raw
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id"`) {
				msg = []byte(data)
			}
		}
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if len(bytes.TrimSpace(msg)) > 0 && json.Unmarshal(msg, &env) == nil {
		out.result, out.err = env.Result, env.Error
	}
	return out
}
