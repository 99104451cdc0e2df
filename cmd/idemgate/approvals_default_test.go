package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/worker"
)

// signedAt reads the time of an Idemgate-Signature value.
func signedAt(t *testing.T, sig string) time.Time {
	t.Helper()
	ts, _, ok := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	require.True(t, ok, sig)
	unix, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err)
	return time.Unix(unix, 0)
}

// TestApprovalNotifyRefusedAtStart: an announcement URL without a usable
// secret, or one sent in the clear off loopback, stops the daemon with exit
// 78 naming the key, never printing the secret.
func TestApprovalNotifyRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("tiny-notify-secret"), 0o600))
	for name, tc := range map[string]struct{ notify, want string }{
		"no secret":    {"{url: https://hooks.example/approvals}", "needs secret_file or secret_env"},
		"short secret": {"{url: https://hooks.example/approvals, secret_file: " + short + "}", "shorter than 32 bytes"},
		"unset env":    {"{url: https://hooks.example/approvals, secret_env: IDEMGATE_TEST_NO_SUCH}", "secret_env IDEMGATE_TEST_NO_SUCH is unset"},
		"clear text":   {"{url: http://hooks.example/approvals, secret_file: " + short + "}", "https URL"},
		"both secrets": {"{url: https://hooks.example/approvals, secret_file: " + short + ", secret_env: X}", "one of secret_file, secret_env"},
	} {
		p := writeConfig(t, "env: test\napprovals:\n  notify: "+tc.notify+"\n")
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "--config", p}, &bytes.Buffer{}, &stderr)
		require.Equal(t, exitConfig, code, "%s: %s", name, stderr.String())
		require.Contains(t, stderr.String(), tc.want, name)
		require.NotContains(t, stderr.String(), "tiny-notify-secret", name)
	}
}

// TestMoneyWaitsForAPersonByDefault: a configuration that says nothing of
// approvals gates payment.charge and payment.refund (and no other built-in
// type); a daemon run with it answers a charge await_approval and sends
// nothing to the payment provider until a person approves with `idemgate
// approve`, then charges once; the same intent again is a replay.
func TestMoneyWaitsForAPersonByDefault(t *testing.T) {
	p := filepath.Join(t.TempDir(), "idemgate.yaml")
	require.NoError(t, os.WriteFile(p, []byte("env: test\n"), 0o600)) // not writeConfig: it turns approvals off
	c, err := loadConfig(flagsWith(t, "--config", p))
	require.NoError(t, err)
	require.True(t, c.Approvals.Enabled)
	reg, err := c.registry()
	require.NoError(t, err)
	policy, err := c.Approvals.policy(reg)
	require.NoError(t, err)
	for _, typ := range reg.Names() {
		want := typ == operation.TypePaymentCharge || typ == operation.TypePaymentRefund
		require.Equal(t, want, policy.Requires(operation.Operation{Type: typ, Fields: map[string]any{"amount_minor": int64(1), "currency": "RUB"}}).Required, typ)
	}

	// A chat bridge receives the request, signed.
	bridge := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bridge <- r
		bodies <- b
	}))
	defer hook.Close()
	const secret = "bridge-secret-0123456789abcdef-0123456789"
	t.Setenv("IDEMGATE_TEST_NOTIFY_SECRET", secret)
	gd := startGatewayDaemon(t, func(c *Config) {
		c.Approvals = defaults().Approvals
		c.Approvals.Notify = notifyConfig{URL: hook.URL + "/approvals", SecretEnv: "IDEMGATE_TEST_NOTIFY_SECRET"}
		c.HTTPAPI = faceConfig{Enabled: true, Addr: "127.0.0.1:0", MaxBody: 64 << 10}
	})
	defer gd.stop()
	api := "http://" + gd.d.faces.httpAddr + "/v1/operations/payment.charge"
	post := func() (int, gateway.Answer, http.Header) {
		req, err := http.NewRequest(http.MethodPost, api, strings.NewReader(
			`{"account_id":"merchant-account-17","order_id":"order-default-1","amount_minor":100,"currency":"RUB"}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", `"default-1"`)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "wait=2")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var a gateway.Answer
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
		return resp.StatusCode, a, resp.Header
	}
	code, a, _ := post()
	require.Equal(t, http.StatusAccepted, code, "%+v", a)
	require.Equal(t, "await_approval", string(a.NextAction), "%+v", a)
	key := a.OperationKey
	require.Equal(t, "test:payment.charge:default-1:v1", key)
	time.Sleep(300 * time.Millisecond) // room for a wrong execution to reach the provider
	require.Zero(t, gd.yk.TotalEffects(), "no charge before a person approves")
	select {
	case r := <-bridge:
		body := <-bodies
		require.Equal(t, worker.SignNotification([]byte(secret), signedAt(t, r.Header.Get(worker.HeaderSignature)), body), r.Header.Get(worker.HeaderSignature))
		var n worker.ApprovalNotification
		require.NoError(t, json.Unmarshal(body, &n))
		require.Equal(t, key, n.OperationKey)
		require.Contains(t, string(n.Request), `"amount_minor":100`)
	case <-time.After(30 * time.Second):
		t.Fatal("the approval request was not announced")
	}

	cfgPath := writeConfig(t, fmt.Sprintf("env: test\ndata_dir: %s\nnats:\n  embedded_addr: %s\nlog:\n  level: warn\napprovals:\n  enabled: true\n",
		gd.cfg.DataDir, gd.cfg.NATS.EmbeddedAddr))
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"approve", key, "--reason", "the order is paid for", "--as", "alice", "--config", cfgPath}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "approved by alice")

	deadline := time.Now().Add(30 * time.Second)
	for {
		code, a, _ = post()
		if code == http.StatusOK || time.Now().After(deadline) {
			break
		}
		require.Equal(t, "await_approval", string(a.NextAction), "%+v", a)
	}
	require.Equal(t, http.StatusOK, code, "%+v", a)
	require.Equal(t, "done", string(a.NextAction))
	code, again, h := post()
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "true", h.Get("Idempotent-Replayed"))
	require.Equal(t, a.TargetObjectID, again.TargetObjectID)
	require.Equal(t, 1, gd.yk.TotalEffects(), "one charge, after the approval")

	// The trace shows the request and the decision: who, when, why.
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"trace", key, "--config", cfgPath}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "approval   approved: 1 of 1 approvals")
	require.Regexp(t, `(?m)^\S+Z\s+alice\s+approve\s+the order is paid for\s+[0-9a-f]{64}$`, out.String())
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"trace", key, "--json", "--config", cfgPath}, &out, &errOut), errOut.String())
	var tr struct {
		Approval struct {
			State string `json:"state"`
			Votes []struct {
				Approver, Vote, Reason string
			} `json:"votes"`
		} `json:"approval"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &tr))
	require.Equal(t, "approved", tr.Approval.State)
	require.Len(t, tr.Approval.Votes, 1)
	require.Equal(t, "alice", tr.Approval.Votes[0].Approver)
	require.Equal(t, "the order is paid for", tr.Approval.Votes[0].Reason)
}
