package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// TestHelperProcessMain runs the binary's main path (signal handling
// included) with the arguments in helperMainEnv; a plain test run skips it.
func TestHelperProcessMain(t *testing.T) {
	args := os.Getenv(helperMainEnv)
	if args == "" {
		return
	}
	os.Exit(run(signalContext(), strings.Fields(args), os.Stdout, os.Stderr))
}

const helperMainEnv = "IDEMGATE_TEST_HELPER_MAIN"

// TestSecondSignalAborts: the first SIGTERM drains, waiting for a call in
// flight; a second one aborts at once with exit 1, as docs/operating.md says.
func TestSecondSignalAborts(t *testing.T) {
	sb := sbyookassa.New(sbyookassa.Options{})
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Delay: 8 * time.Second, Count: 1}))
	called := make(chan struct{}, 16)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			called <- struct{}{}
		}
		sb.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	shop, secret := sb.Credentials()
	dataDir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`env: test
data_dir: %q
admin: {addr: ''}
log: {level: info, format: text}
nats: {embedded_addr: "127.0.0.1:0", fetch_wait: 50ms, ack_wait: 30s}
worker: {shutdown_timeout: 1m, call_timeout: 7s, lease_ttl: 9s, heartbeat_interval: 1s}
routes: {payment.charge: yookassa}
adapters:
  yookassa: {base_url: %q, shop_id: %q, secret_key: %q}
`, dataDir, front.URL, shop, secret))

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessMain$")
	cmd.Env = append(os.Environ(), helperMainEnv+"=run --config "+cfg)
	var stderr lockedWriter
	stderr.w = &bytes.Buffer{}
	cmd.Stderr = &stderr
	var published string
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("daemon's stderr:\n%s\npublish: %s", stderr.String(), published)
		}
	})

	// The port the daemon's embedded NATS took, as its log says.
	natsURL := loggedAttr(t, &stderr, "nats: embedded JetStream server", "url")
	require.Eventually(t, func() bool {
		code, _, errs := runTool(t, append(chargeArgs("evt-signal-1", "--env", "test"), "--data-dir", dataDir, "--nats-url", natsURL)...)
		published = errs
		return code == exitOK
	}, 30*time.Second, 200*time.Millisecond, "publish to the daemon")
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatalf("the charge never reached the target: %s", stderr.String())
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		t.Fatalf("the first signal must drain, waiting for the call in flight; exited: %v\n%s", err, stderr.String())
	case <-time.After(time.Second):
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("a second signal must abort: %s", stderr.String())
	}
	require.Equal(t, exitFailure, cmd.ProcessState.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "idemgate: second signal, aborting")
}
