package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/cmd/idemgate/internal/sandboxes"
	"github.com/idemgate/idemgate/sandbox"
)

// startSandboxCmd runs `idemgate sandbox args...` and returns name → URL as
// printed, the whole banner, and a stop function returning the exit code.
func startSandboxCmd(t *testing.T, args ...string) (map[string]string, string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := run(ctx, append([]string{"sandbox", "--quiet"}, args...), pw, io.Discard)
		_ = pw.CloseWithError(io.EOF)
		code <- c
	}()
	urls := map[string]string{}
	var banner strings.Builder
	head := regexp.MustCompile(`^([a-z0-9]+)  (http://127\.0\.0\.1:\d+)$`)
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		banner.WriteString(line + "\n")
		if m := head.FindStringSubmatch(line); m != nil {
			urls[m[1]] = m[2]
		}
		if strings.HasPrefix(line, "Serving") {
			break
		}
	}
	// Keep draining so that the command never blocks on its output.
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	stop := func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("idemgate sandbox did not stop on cancel")
			return -1
		}
	}
	t.Cleanup(func() { cancel() })
	return urls, banner.String(), stop
}

// TestSandboxCommand: every emulator of the list starts, answers its admin
// API on the printed URL, and stops when the context ends.
func TestSandboxCommand(t *testing.T) {
	t.Parallel()
	urls, banner, stop := startSandboxCmd(t)
	all, err := sandboxes.All(sandbox.Options{})
	require.NoError(t, err)
	require.ElementsMatch(t, all.Names(), keys(urls), banner)
	require.GreaterOrEqual(t, len(urls), 6, "1C, Bitrix24, amoCRM, YooKassa, T-Bank, Stripe")
	for name, u := range urls {
		resp, err := httpClient.Get(u + "/_sandbox/ledger")
		require.NoError(t, err, name)
		var ledger struct {
			Target string `json:"target"`
			Total  int    `json:"total"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&ledger))
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, name, ledger.Target)
		require.Zero(t, ledger.Total)
		require.Contains(t, banner, u+"/_sandbox/faults", name)
	}
	// The printed credentials work: YooKassa accepts them and counts the payment.
	y := urls["yookassa"]
	req, err := http.NewRequest(http.MethodPost, y+"/v3/payments", strings.NewReader(
		`{"amount":{"value":"10.00","currency":"RUB"},"capture":true,"payment_method_id":"pm-1","description":"manual"}`))
	require.NoError(t, err)
	m := regexp.MustCompile(`shop_id=(\S+)\s+secret_key=(\S+)`).FindStringSubmatch(banner)
	require.NotNil(t, m, banner)
	req.SetBasicAuth(m[1], m[2])
	req.Header.Set("Idempotence-Key", "manual-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, httpGet(t, y+"/_sandbox/ledger?key=manual-1"), `"count":1`)
	require.Contains(t, banner, "adapters:\n  amocrm:")
	require.Contains(t, banner, "    base_url: "+y)

	require.Equal(t, exitOK, stop())
	for name, u := range urls {
		_, err := httpClient.Get(u + "/_sandbox/ledger")
		require.Error(t, err, "%s still answers after stop", name)
	}
}

func TestSandboxListenFlag(t *testing.T) {
	t.Parallel()
	addr := reservedAddr(t)
	urls, _, stop := startSandboxCmd(t, "--listen", "stripe="+addr)
	require.Equal(t, "http://"+addr, urls["stripe"])
	require.Equal(t, exitOK, stop())

	var errOut strings.Builder
	code := run(context.Background(), []string{"sandbox", "--listen", "teleport=127.0.0.1:0"}, io.Discard, &errOut)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut.String(), "no such emulator")
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSandboxBitrix24PlanFlag: --bitrix24-plan enterprise gives the portal
// Enterprise's bucket (250 requests): 60 requests at once, more than the
// standard plan's 50, all pass; an unknown plan is a usage error.
func TestSandboxBitrix24PlanFlag(t *testing.T) {
	t.Parallel()
	count429 := func(u string) int {
		limited := 0
		for range 60 {
			resp, err := httpClient.Get(u + "/rest/1/sandbox4l777m8lapmdaz/crm.deal.list.json")
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				limited++
			}
		}
		return limited
	}
	urls, _, stop := startSandboxCmd(t, "--bitrix24-plan", "enterprise")
	require.Zero(t, count429(urls["bitrix24"]), "enterprise: 60 requests within a 250-request bucket")
	require.Equal(t, exitOK, stop())
	urls, _, stop = startSandboxCmd(t)
	require.Positive(t, count429(urls["bitrix24"]), "standard: 60 requests overflow a 50-request bucket")
	require.Equal(t, exitOK, stop())

	var errOut strings.Builder
	code := run(context.Background(), []string{"sandbox", "--bitrix24-plan", "gold"}, io.Discard, &errOut)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut.String(), `bitrix24 portal plan "gold": want standard or enterprise`)
}

// TestSandboxWriteConfig: the file --write-config writes is a configuration
// the daemon accepts as it is — it loads with unknown keys refused, passes
// validation, builds an adapter for every route against the running
// emulators, and turns the HTTP API and MCP on at the addresses it names —
// so the walkthrough's file cannot drift from the daemon's keys. A second
// start writes it again; someone's own file is never overwritten.
func TestSandboxWriteConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idemgate.yaml")
	urls, banner, stop := startSandboxCmd(t, "--write-config", path)
	require.Contains(t, banner, "Wrote "+path)
	written, err := os.ReadFile(path)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "it holds test credentials")

	c, err := loadConfig(flagsWith(t, "--config", path))
	require.NoError(t, err, string(written))
	require.NoError(t, c.validate(), string(written))
	require.Equal(t, "test", c.Env)
	require.True(t, c.HTTPAPI.Enabled)
	require.True(t, c.MCP.Listener.Enabled)
	d := defaults()
	require.Equal(t, d.HTTPAPI.Addr, c.HTTPAPI.Addr)
	require.Equal(t, d.MCP.Listener.Addr, c.MCP.Listener.Addr)
	require.Equal(t, d.Admin.Addr, c.Admin.Addr)
	require.Equal(t, d.NATS.EmbeddedAddr, c.NATS.EmbeddedAddr)
	for _, key := range []string{"admin", "nats: {embedded_addr", "http_api: {enabled: true, addr", "mcp: {enabled: true, addr"} {
		require.Contains(t, string(written), key, "the file names the key that moves each address")
	}
	routes, err := buildAdapters(c, quietLog(), nil)
	require.NoError(t, err)
	reg, err := c.registry()
	require.NoError(t, err)
	for _, typ := range reg.Names() {
		require.Contains(t, routes, typ, "every built-in operation type is routed")
	}
	require.Equal(t, urls["yookassa"], c.Adapters.YooKassa.BaseURL)
	require.Equal(t, exitOK, stop())

	// Started again: the emulators' new ports are written over the old file.
	urls2, _, stop2 := startSandboxCmd(t, "--write-config", path)
	c, err = loadConfig(flagsWith(t, "--config", path))
	require.NoError(t, err)
	require.Equal(t, urls2["yookassa"], c.Adapters.YooKassa.BaseURL)
	require.Equal(t, exitOK, stop2())

	// Someone's own configuration is left alone.
	own := filepath.Join(t.TempDir(), "own.yaml")
	require.NoError(t, os.WriteFile(own, []byte("env: prod\n"), 0o600))
	var errOut strings.Builder
	code := run(context.Background(), []string{"sandbox", "--quiet", "--write-config", own}, io.Discard, &errOut)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut.String(), "was not written by idemgate sandbox")
	b, err := os.ReadFile(own)
	require.NoError(t, err)
	require.Equal(t, "env: prod\n", string(b))
}
