package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
)

// TestReadmeWalkthrough runs the README's "From the demo to an agent" as
// written: `idemgate sandbox --write-config idemgate.yaml`, then `run`
// with that file, each curl (the POST answered succeeded and done, sent
// again answered as a replay with one payment in the emulator's ledger,
// the GET by key), `publish --wait` and `trace`. Only the daemon's listen
// addresses are moved to free ports, in the written file and in the
// curls' URLs alike. The desktop client's snippet launches a command that
// exists with the flags it gives.
func TestReadmeWalkthrough(t *testing.T) {
	section := readmeSection(t, readme(t), "From the demo to an agent")
	var steps [][]string
	for _, block := range codeBlocks(section, "sh") {
		for _, cmd := range shellCommands(block) {
			steps = append(steps, shellWords(t, cmd))
		}
	}
	require.GreaterOrEqual(t, len(steps), 6, section)
	require.Equal(t, []string{"idemgate", "sandbox"}, steps[0][:2])
	require.Equal(t, []string{"idemgate", "run"}, steps[1][:2])

	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("IDEMGATE_CONFIG", "")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())

	// Terminal 1: the emulators write the configuration.
	urls, _, stopSandbox := startSandboxCmd(t, steps[0][2:]...)
	defer stopSandbox()
	file := steps[0][len(steps[0])-1]
	written, err := os.ReadFile(file)
	require.NoError(t, err)
	moved := map[string]string{}
	d := defaults()
	text := string(written)
	for _, addr := range []string{d.Admin.Addr, d.NATS.EmbeddedAddr, d.HTTPAPI.Addr, d.MCP.Listener.Addr} {
		require.Contains(t, text, addr)
		moved[addr] = reservedAddr(t)
		text = strings.ReplaceAll(text, addr, moved[addr])
	}
	require.NoError(t, os.WriteFile(file, []byte(text), 0o600))

	// Terminal 2: the daemon.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedWriter{w: &bytes.Buffer{}}
	done := make(chan int, 1)
	go func() { done <- run(ctx, steps[1][1:], io.Discard, logs) }()
	require.Eventually(t, func() bool {
		select {
		case code := <-done:
			done <- code
			return true
		default:
		}
		resp, err := httpClient.Get("http://" + moved[d.Admin.Addr] + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond)
	select {
	case code := <-done:
		t.Fatalf("idemgate run exited %d: %s", code, logs.String())
	default:
	}
	_, err = os.Stat(filepath.Join(".idemgate", "journal.db"))
	require.NoError(t, err, "the journal is in .idemgate beside the file")

	posts := 0
	for _, step := range steps[2:] {
		switch step[0] {
		case "curl":
			req := curlRequest(t, step, moved)
			sends := 1
			if req.body != "" {
				sends = 2 // a POST is sent again: the second is a replay
			}
			for range sends {
				resp, err := httpClient.Do(req.build(t))
				require.NoError(t, err)
				raw, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", strings.Join(step, " "), raw)
				var a struct {
					Status         string `json:"status"`
					NextAction     string `json:"next_action"`
					TargetObjectID string `json:"target_object_id"`
					Replayed       bool   `json:"replayed"`
				}
				require.NoError(t, json.Unmarshal(raw, &a))
				require.Equal(t, "succeeded", a.Status, "%s", raw)
				require.Equal(t, "done", a.NextAction, "%s", raw)
				require.NotEmpty(t, a.TargetObjectID)
				if req.body != "" {
					posts++
					require.Equal(t, posts > 1, a.Replayed, "%s", raw)
					require.Equal(t, posts > 1, resp.Header.Get("Idempotent-Replayed") == "true")
				}
			}
		case "idemgate":
			var out, errb bytes.Buffer
			code := run(ctx, step[1:], &out, &errb)
			require.Equal(t, exitOK, code, "%s: %s", strings.Join(step, " "), errb.String())
			switch step[1] {
			case "publish":
				var r operation.Result
				require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
				require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
				require.True(t, strings.HasPrefix(r.OperationKey, "test:"), r.OperationKey)
			case "trace":
				require.Contains(t, out.String(), "status     succeeded")
			default:
				t.Fatalf("the walkthrough's step %q is not checked here", step[1])
			}
		default:
			t.Fatalf("the walkthrough's command %q is not checked here", step[0])
		}
	}
	require.Equal(t, 2, posts, "the POST was sent and sent again")
	require.Contains(t, section, "`/_sandbox/ledger`")
	ledger := httpGet(t, urls["yookassa"]+"/_sandbox/ledger")
	require.Contains(t, ledger, `"total":1`, "one payment however often the intent is sent")

	// The desktop client launches `idemgate mcp --config FILE`.
	blocks := codeBlocks(section, "json")
	require.Len(t, blocks, 1)
	var client struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	require.NoError(t, json.Unmarshal([]byte(blocks[0]), &client))
	srv := client.MCPServers["idemgate"]
	require.True(t, strings.HasSuffix(srv.Command, "/idemgate"), srv.Command)
	require.Equal(t, []string{"mcp", "--config"}, srv.Args[:2])
	mcp, rest, err := newRoot(io.Discard, io.Discard).Find(srv.Args[:1])
	require.NoError(t, err)
	require.Empty(t, rest)
	require.NotNil(t, mcp.Flag("config"), "idemgate mcp --config")

	cancel()
	require.Equal(t, exitOK, <-done, logs.String())
}

// curlCall is a request a README curl line makes.
type curlCall struct {
	url     string
	headers [][2]string
	body    string
}

func (c curlCall) build(t *testing.T) *http.Request {
	t.Helper()
	method := http.MethodGet
	var body io.Reader
	if c.body != "" {
		method, body = http.MethodPost, strings.NewReader(c.body)
	}
	req, err := http.NewRequest(method, c.url, body)
	require.NoError(t, err)
	for _, h := range c.headers {
		req.Header.Add(h[0], h[1])
	}
	return req
}

// curlRequest reads the curl options the README uses (-i, -H, -d, one
// URL), with the URL's address moved as the configuration's was.
func curlRequest(t *testing.T, words []string, moved map[string]string) curlCall {
	t.Helper()
	var c curlCall
	for i := 1; i < len(words); i++ {
		switch w := words[i]; w {
		case "-i":
		case "-H":
			i++
			name, value, ok := strings.Cut(words[i], ":")
			require.True(t, ok, words[i])
			c.headers = append(c.headers, [2]string{name, strings.TrimSpace(value)})
		case "-d":
			i++
			c.body = words[i]
		default:
			require.True(t, strings.HasPrefix(w, "http://"), "curl option %q is not read here", w)
			c.url = w
		}
	}
	for from, to := range moved {
		c.url = strings.Replace(c.url, "//"+from+"/", "//"+to+"/", 1)
	}
	require.NotEmpty(t, c.url)
	return c
}

// TestReadmeSmallestConfiguration: the README's configuration against one
// real target loads as written, passes the daemon's checks, and builds its
// routes with the credentials taken from the environment variables it
// names (nothing is called: building an adapter reaches no target).
func TestReadmeSmallestConfiguration(t *testing.T) {
	section := readmeSection(t, readme(t), "The smallest configuration against a real target")
	blocks := codeBlocks(section, "yaml")
	require.Len(t, blocks, 1)
	t.Setenv("YOOKASSA_SHOP_ID", "100500")
	t.Setenv("YOOKASSA_SECRET_KEY", "test_readme_secret_key")
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, blocks[0])))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	require.True(t, c.HTTPAPI.Enabled)
	require.Empty(t, c.Journal.URL, "the SQLite journal")
	require.Empty(t, c.NATS.URL, "the embedded NATS")
	routes, err := buildAdapters(c, quietLog(), nil)
	require.NoError(t, err)
	require.Contains(t, routes, "payment.charge")
	require.Contains(t, routes, "payment.refund")
	require.Equal(t, "https://api.yookassa.ru", strings.TrimSuffix(c.Adapters.YooKassa.WithDefaults().BaseURL, "/"))
}
