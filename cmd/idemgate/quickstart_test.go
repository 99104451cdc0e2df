package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
)

// TestReadmeQuickStart runs the README's "run the daemon against the
// emulators" steps as written: `idemgate sandbox`, its adapters block saved
// with the README's env and routes as ./idemgate.yaml, then `run`, `publish
// --wait` and `trace` with no other flag — they agree on the environment and
// on where NATS and the journal are because they read the same file. Only
// the listen addresses are moved to free ports.
func TestReadmeQuickStart(t *testing.T) {
	var block string
	for _, b := range codeBlocks(readmeSection(t, readme(t), "Quick start"), "sh") {
		if strings.Contains(b, "idemgate sandbox") {
			block = b
		}
	}
	require.NotEmpty(t, block, "the quick start's daemon steps")
	var yaml strings.Builder
	for _, m := range regexp.MustCompile(`(?m)^#   (.+)$`).FindAllStringSubmatch(block, -1) {
		yaml.WriteString(m[1] + "\n")
	}
	require.Contains(t, yaml.String(), "env: test")
	require.Contains(t, yaml.String(), "routes:")

	var steps [][]string
	for _, cmd := range shellCommands(block) {
		words := shellWords(t, cmd)
		require.Equal(t, []string{"go", "run", "./cmd/idemgate"}, words[:3], cmd)
		steps = append(steps, words[3:])
	}
	require.Equal(t, "sandbox", steps[0][0])
	require.Equal(t, []string{"run"}, steps[1])

	// Terminal 1: the emulators; their adapters block goes into the file.
	_, banner, stopSandbox := startSandboxCmd(t, steps[0][1:]...)
	defer stopSandbox()
	_, adaptersBlock, ok := strings.Cut(banner, "\nadapters:\n")
	require.True(t, ok, banner)
	adaptersBlock, _, _ = strings.Cut(adaptersBlock, "\n\n")
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("IDEMGATE_CONFIG", "")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	// The file names the embedded NATS's address for the tools of the
	// later steps, so it is fixed beforehand.
	admin := reservedAddr(t)
	fmt.Fprintf(&yaml, "admin: {addr: %q}\nnats: {embedded_addr: %q, fetch_wait: 50ms}\nadapters:\n%s\n", admin, reservedAddr(t), adaptersBlock)
	require.NoError(t, os.WriteFile("idemgate.yaml", []byte(yaml.String()), 0o600))

	// Terminal 2: the daemon.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedWriter{w: &bytes.Buffer{}}
	done := make(chan int, 1)
	go func() { done <- run(ctx, steps[1], io.Discard, logs) }()
	require.Eventually(t, func() bool {
		select {
		case code := <-done:
			done <- code
			return true
		default:
		}
		resp, err := httpClient.Get("http://" + admin + "/readyz")
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
	_, err := os.Stat(filepath.Join(".idemgate", "journal.db"))
	require.NoError(t, err, "the journal is in ./.idemgate")

	for _, step := range steps[2:] {
		var out, errb bytes.Buffer
		code := run(ctx, step, &out, &errb)
		require.Equal(t, exitOK, code, "idemgate %s: %s", strings.Join(step, " "), errb.String())
		switch step[0] {
		case "publish":
			var r operation.Result
			require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
			require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
			require.True(t, strings.HasPrefix(r.OperationKey, "test:"), r.OperationKey)
			require.Empty(t, errb.String(), "publish and the daemon derive the same key")
		case "trace":
			require.Contains(t, out.String(), "status     succeeded")
		}
	}
	// resolve reads the same journal: it finds the key and refuses (the
	// operation succeeded, it is not unknown), where another journal would
	// not know the key (exit 4).
	var published string
	for _, step := range steps[2:] {
		if step[0] == "trace" {
			published = step[1]
		}
	}
	code, _, stderr := runTool(t, "resolve", published, "--as", "failed_final", "--evidence", "checked", "--operator", "test")
	require.NotEqual(t, exitUnknown, code, stderr)
	require.NotEqual(t, exitOK, code, stderr)
	require.Contains(t, stderr, "already final (succeeded")
	cancel()
	require.Equal(t, exitOK, <-done, logs.String())
}
