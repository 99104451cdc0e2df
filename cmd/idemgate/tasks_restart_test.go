package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/sandbox"
)

// runUntilStopped runs `idemgate run` on c in-process; stop shuts it down
// gracefully and waits for it.
func runUntilStopped(t *testing.T, c Config) (d *daemon, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *daemon, 1)
	done := make(chan error, 1)
	go func() {
		done <- runDaemon(ctx, c, newLogger(c, &lockedWriter{w: &bytes.Buffer{}}), func(d *daemon) { started <- d })
	}()
	select {
	case d = <-started:
	case err := <-done:
		cancel()
		t.Fatalf("daemon ended: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("daemon did not start")
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	return d, stop
}

// modernCall sends one request of the current MCP revision, declaring the
// Tasks extension, and returns its result.
func modernCall(t *testing.T, endpoint, method, name string, params map[string]any) json.RawMessage {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": gwmcp.RevisionCurrent,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{gwmcp.ExtensionTasks: map[string]any{}}}}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", gwmcp.RevisionCurrent)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 { // an event stream: its one message
		raw = bytes.TrimSpace(raw[i+len("data: "):])
	}
	var env struct {
		Result json.RawMessage  `json:"result"`
		Error  *json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &env), "%s", raw)
	require.Nil(t, env.Error, "%s", raw)
	return env.Result
}

type restartTask struct {
	ResultType     string    `json:"resultType"`
	TaskID         string    `json:"taskId"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"createdAt"`
	PollIntervalMs int64     `json:"pollIntervalMs"`
	Result         *struct {
		StructuredContent gateway.Answer `json:"structuredContent"`
	} `json:"result"`
}

// TestTaskReadBackAfterRestart: a charge YooKassa answers slowly is
// handed to an MCP client as a task while it runs; the daemon (with its
// MCP face) stops and starts again on the same data folder, and the task
// is read back there — the same id and creation time, then completed with
// the one payment.
func TestTaskReadBackAfterRestart(t *testing.T) {
	gd := startGatewayDaemon(t, func(c *Config) {
		c.MCP.Listener = faceConfig{Enabled: true, Addr: "127.0.0.1:0", MaxBody: 1 << 20}
		c.Gateway.PollAfter = 200 * time.Millisecond
	})
	cfg := gd.cfg
	require.NoError(t, gd.yk.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Delay: 4 * time.Second, Count: 1}))
	endpoint := "http://" + gd.d.faces.mcpAddr + "/mcp"
	var created restartTask
	require.NoError(t, json.Unmarshal(modernCall(t, endpoint, "tools/call", "payment_charge",
		map[string]any{"name": "payment_charge", "arguments": chargeArguments("restart-1", 4200)}), &created))
	require.Equal(t, "task", created.ResultType)
	require.Equal(t, "test:payment.charge:restart-1:v1", created.TaskID)
	require.Equal(t, gateway.TaskWorking, created.Status)

	// Stop this daemon (its in-flight call finishes first), start another
	// on the same data folder: journal and JetStream store.
	gd.stop()
	cfg.NATS.EmbeddedAddr = "127.0.0.1:0"
	d, _ := runUntilStopped(t, cfg)
	endpoint = "http://" + d.faces.mcpAddr + "/mcp"

	var got restartTask
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = restartTask{}
		require.NoError(t, json.Unmarshal(modernCall(t, endpoint, "tasks/get", created.TaskID, map[string]any{"taskId": created.TaskID}), &got))
		if got.Status != gateway.TaskWorking || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Duration(got.PollIntervalMs) * time.Millisecond) // the task's poll interval
	}
	require.Equal(t, created.TaskID, got.TaskID)
	require.True(t, created.CreatedAt.Equal(got.CreatedAt), "the record made before the restart: %v, %v", created.CreatedAt, got.CreatedAt)
	require.Equal(t, gateway.TaskCompleted, got.Status)
	require.NotNil(t, got.Result)
	require.Equal(t, gateway.StatusSucceeded, got.Result.StructuredContent.Status)
	require.Equal(t, gateway.Done, got.Result.StructuredContent.NextAction)
	require.Equal(t, 1, gd.yk.TotalEffects())
}
