package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/wire"
)

// TestIngestCommand: `idemgate ingest` serves the webhook server alone: a
// signed notification becomes one command in the commands stream (created
// if missing), a repeat adds none, and the command stops on cancel.
func TestIngestCommand(t *testing.T) {
	t.Parallel()
	for _, natsKey := range []string{"url", "embedded_addr"} {
		t.Run(natsKey, func(t *testing.T) {
			t.Parallel()
			ns := natstest.Start(t)
			at := ns.URL()
			if natsKey == "embedded_addr" {
				at = strings.TrimPrefix(at, "nats://") // where a running daemon serves its embedded NATS
			}
			testIngestCommand(t, ns, fmt.Sprintf("nats: {%s: %q}\n", natsKey, at))
		})
	}
	t.Run("no sources", func(t *testing.T) {
		t.Parallel()
		code, _, stderr := runTool(t, "ingest", "--config", writeConfig(t, "env: test\n"))
		require.Equal(t, exitConfig, code)
		require.Contains(t, stderr, "ingest.sources")
	})
}

func testIngestCommand(t *testing.T, ns *natstest.Server, natsYAML string) {
	_, js := ns.Connect(t)
	const secret = "whsec_test_ingest_cmd"
	p := writeConfig(t, fmt.Sprintf(`
env: test
%s
ingest:
  addr: %q
  sources:
    - name: payments
      scheme: stripe
      secrets: [%q]
      routes:
        - event: payment_intent.succeeded
          operation: crm.task.create
          intent_paths: [data.object.id]
          payload:
            - {field: title, value: "Call the customer"}
            - {field: responsible_id, value: "7"}
`, natsYAML, "127.0.0.1:0", secret))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr lockedWriter
	stderr.w = &bytes.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"ingest", "--config", p}, io.Discard, &stderr) }()
	addr := loggedAttr(t, &stderr, "ingest listening", "addr") // the port it took

	body := []byte(`{"id":"evt_ingest_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1"}}}`)
	post := func() int {
		ts := time.Now().Unix()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/payments", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", "t="+strconv.FormatInt(ts, 10)+",v1="+ingest.StripeSignature(secret, ts, body))
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for post() != http.StatusOK {
		select {
		case code := <-done:
			t.Fatalf("idemgate ingest exited %d: %s", code, stderr.String())
		case <-deadline:
			t.Fatalf("idemgate ingest never accepted the notification: %s", stderr.String())
		case <-tick.C:
		}
	}
	require.Equal(t, http.StatusOK, post(), "a repeat is acknowledged")

	c := consumer.Config{}.WithDefaults()
	st, err := js.Stream(ctx, c.CommandsStream)
	require.NoError(t, err)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(wire.CommandSubject("crm.task.create")))
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "one command for the notification and its repeat")
	cancel()
	require.Equal(t, exitOK, <-done, stderr.String())
}
