package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/wire"
)

// chargeArgs is `idemgate publish` for a payment.charge with event id ev.
func chargeArgs(ev string, extra ...string) []string {
	return append([]string{"publish", "--operation", "payment.charge", "--event", ev, "--approval", "appr-1",
		"--payload", `{"account_id":"merchant-account-17","order_id":"order-` + ev + `","amount_minor":125000,"currency":"RUB"}`}, extra...)
}

func runTool(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestPublishSaysWhyNothingAnswers: without a daemon, `publish --wait` does
// not wait out its timeout for nothing: an unreachable NATS and a missing
// commands stream are said at once; a stored command with no result within
// --timeout is named by key and stream sequence, pending or not.
func TestPublishSaysWhyNothingAnswers(t *testing.T) {
	t.Parallel()
	t.Run("no NATS", func(t *testing.T) {
		t.Parallel()
		addr := refusingAddr(t)
		code, _, stderr := runTool(t, chargeArgs("evt-nonats", "--env", "test", "--data-dir", t.TempDir(), "--config", writeConfig(t,
			fmt.Sprintf("nats: {embedded_addr: %q}\n", addr)), "--wait")...)
		require.Equal(t, exitFailure, code)
		require.Contains(t, stderr, "cannot reach NATS at nats://"+addr)
		require.Contains(t, stderr, "is the daemon running")
	})
	t.Run("embedded NATS on port 0", func(t *testing.T) {
		t.Parallel()
		// A daemon given port 0 took a port of its own: a tool cannot guess it.
		code, _, stderr := runTool(t, chargeArgs("evt-port0", "--env", "test", "--data-dir", t.TempDir(), "--config", writeConfig(t,
			"nats: {embedded_addr: \"127.0.0.1:0\"}\n"), "--wait")...)
		require.Equal(t, exitConfig, code, stderr)
		require.Contains(t, stderr, "nats.embedded_addr 127.0.0.1:0 has port 0")
		require.Contains(t, stderr, "--nats-url")
	})
	t.Run("no stream", func(t *testing.T) {
		t.Parallel()
		ns := natstest.Start(t)
		code, _, stderr := runTool(t, chargeArgs("evt-nostream", "--env", "test", "--nats-url", ns.URL(), "--wait")...)
		require.Equal(t, exitFailure, code)
		require.Contains(t, stderr, "no JetStream stream takes this command's subject")
		require.Contains(t, stderr, "idemgate.cmd.payment.charge")
	})
	t.Run("no result in time", func(t *testing.T) {
		t.Parallel()
		ns := natstest.Start(t)
		_, js := ns.Connect(t)
		_, err := consumer.Ensure(context.Background(), js, consumer.Config{}.WithDefaults())
		require.NoError(t, err)
		code, _, stderr := runTool(t, chargeArgs("evt-nodaemon", "--env", "test", "--nats-url", ns.URL(), "--wait", "--timeout", "3s")...)
		require.Equal(t, exitPending, code, "stored, not answered yet: %s", stderr)
		// Said before the timeout (producer's TestWaitSaysNoDaemonFetches
		// times it: within two seconds).
		require.Contains(t, stderr, "note: no daemon is fetching from IDEMGATE_COMMANDS (its consumer idemgate-worker has no waiting pull and nothing in flight")
		require.Contains(t, stderr, "the command is stored as IDEMGATE_COMMANDS sequence 1 and stays there; a daemon that starts")
		require.Contains(t, stderr, "waiting up to --timeout 3s")
		require.Contains(t, stderr, "no result for test:payment.charge:evt-nodaemon:v1")
		require.Contains(t, stderr, "IDEMGATE_COMMANDS sequence 1")
		require.Less(t, strings.Index(stderr, "note: no daemon"), strings.Index(stderr, "no result for"), "the note comes first")
	})
	t.Run("still pending", func(t *testing.T) {
		t.Parallel()
		ns := natstest.Start(t)
		nc, js := ns.Connect(t)
		_, err := consumer.Ensure(context.Background(), js, consumer.Config{}.WithDefaults())
		require.NoError(t, err)
		// A daemon that only reports the outcome pending, as one does while
		// it settles an unknown outcome.
		sub, err := nc.Subscribe(wire.CommandPrefix+">", func(m *nats.Msg) {
			reply := m.Header.Get(wire.HeaderReplyTo)
			r := operation.Result{OperationKey: "test:payment.charge:evt-pending:v1", EventID: "evt-pending",
				Operation: "payment.charge", Status: operation.ResultPending}
			body, _ := json.Marshal(r)
			_ = nc.Publish(reply, body)
		})
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		require.NoError(t, nc.Flush())
		code, _, stderr := runTool(t, chargeArgs("evt-pending", "--env", "test", "--nats-url", ns.URL(), "--wait", "--timeout", "1s")...)
		require.Equal(t, exitPending, code, stderr)
		require.Contains(t, stderr, "pending: test:payment.charge:evt-pending:v1")
		require.Contains(t, stderr, "still pending")
		require.Contains(t, stderr, "test:payment.charge:evt-pending:v1")
	})
	t.Run("default timeout", func(t *testing.T) {
		t.Parallel()
		publish, _, err := newRoot(io.Discard, io.Discard).Find([]string{"publish"})
		require.NoError(t, err)
		require.Equal(t, "30s", publish.Flags().Lookup("timeout").DefValue, "as docs/operating.md says")
	})
	t.Run("invalid command", func(t *testing.T) {
		t.Parallel()
		code, _, stderr := runTool(t, "publish", "--env", "test", "--operation", "payment.charge", "--event", "evt-bad",
			"--payload", `{"account_id":"a"}`, "--nats-url", "nats://127.0.0.1:1")
		require.Equal(t, exitUsage, code, "refused before any connection")
		require.Contains(t, stderr, "rejected command")
	})
}

// TestPublishAgainstDaemon: publish prints where a command went, --wait its
// result; a repeat of the same event id (a JetStream duplicate) gets the
// stored result; a publish whose env differs from the daemon's says so.
func TestPublishAgainstDaemon(t *testing.T) {
	t.Parallel()
	sb := sbyookassa.New(sbyookassa.Options{})
	url, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	shop, secret := sb.Credentials()
	c := testDefaults()
	c.Env = "test"
	c.DataDir = t.TempDir()
	c.Admin.Addr = ""
	c.NATS.EmbeddedAddr = "127.0.0.1:0"
	c.NATS.FetchWait = 50 * time.Millisecond
	c.Routes = map[string]string{"payment.charge": "yookassa"}
	c.Adapters.YooKassa = &yookassa.Config{BaseURL: url, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}}
	require.NoError(t, c.validate())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *daemon, 1)
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, c, quietLog(), func(d *daemon) { started <- d }) }()
	var natsAddr string // the port the daemon's embedded NATS took
	select {
	case d := <-started:
		natsAddr = d.natsAddr
	case err := <-done:
		t.Fatalf("daemon ended: %v", err)
	}
	nats := []string{"--data-dir", c.DataDir, "--nats-url", "nats://" + natsAddr}

	code, out, stderr := runTool(t, append(chargeArgs("evt-pub-1", "--env", "test"), nats...)...)
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "published evt-pub-1 as stream sequence 1 (duplicate=false), key test:payment.charge:evt-pub-1:v1\n", out)

	var first, again operation.Result
	code, out, stderr = runTool(t, append(chargeArgs("evt-pub-2", "--env", "test", "--wait"), nats...)...)
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &first))
	require.Equal(t, operation.ResultSucceeded, first.Status)
	require.Equal(t, "test:payment.charge:evt-pub-2:v1", first.OperationKey)
	code, out, stderr = runTool(t, append(chargeArgs("evt-pub-2", "--env", "test", "--wait"), nats...)...)
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &again))
	require.Equal(t, first.TargetObjectID, again.TargetObjectID, "the duplicate gets the stored result")
	require.True(t, again.Replayed)

	// The same event id with a changed amount, inside the duplicate window:
	// not taken for a copy (the first result replayed) but answered
	// conflict, and nothing charged.
	changed := []string{"publish", "--operation", "payment.charge", "--event", "evt-pub-2", "--approval", "appr-1", "--env", "test", "--wait",
		"--payload", `{"account_id":"merchant-account-17","order_id":"order-evt-pub-2","amount_minor":999000,"currency":"RUB"}`}
	var conflict operation.Result
	code, out, stderr = runTool(t, append(changed, nats...)...)
	require.Equal(t, exitConflict, code, "a conflict is not a success: %s", stderr)
	require.Contains(t, stderr, "the result is conflict (idempotency_key_payload_mismatch): exit 6")
	require.NoError(t, json.Unmarshal([]byte(out), &conflict), "the result is printed all the same")
	require.Equal(t, operation.ResultConflict, conflict.Status, "%s", out)
	require.Equal(t, []string{"amount_minor"}, conflict.ConflictFields)
	require.Equal(t, 2, sb.TotalEffects())

	code, out, stderr = runTool(t, append(chargeArgs("evt-pub-3", "--env", "staging", "--wait"), nats...)...)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, `"operation_key": "test:payment.charge:evt-pub-3:v1"`)
	require.Contains(t, stderr, "the daemon answered for test:payment.charge:evt-pub-3:v1, not staging:payment.charge:evt-pub-3:v1")
	require.Equal(t, 3, sb.TotalEffects(), "three intents, three charges")

	// A charge the payment network declines: failed_final, its own code.
	declined := []string{"publish", "--operation", "payment.charge", "--event", "evt-pub-4", "--approval", "appr-1", "--env", "test", "--wait",
		"--payload", `{"account_id":"` + sbyookassa.MethodDeclined + `","order_id":"order-evt-pub-4","amount_minor":5000,"currency":"RUB"}`}
	code, out, stderr = runTool(t, append(declined, nats...)...)
	require.Equal(t, exitFailedFinal, code, "%s\n%s", out, stderr)
	var refused operation.Result
	require.NoError(t, json.Unmarshal([]byte(out), &refused))
	require.Equal(t, operation.ResultFailedFinal, refused.Status)
	cancel()
	require.NoError(t, <-done)
}

func TestWithoutPasswords(t *testing.T) {
	t.Parallel()
	require.Equal(t, "nats://app:xxxxx@a:4222,nats://b:4222", withoutPasswords("nats://app:hunter2@a:4222,nats://b:4222"))
}
