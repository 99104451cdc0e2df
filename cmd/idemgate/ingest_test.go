package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	sbbitrix "github.com/idemgate/idemgate/sandbox/bitrix24"
)

// TestWebhookDeliveredThreeTimesMakesOneTask: a signed Stripe-style webhook
// delivered three times becomes one command and one CRM task in the Bitrix24
// sandbox once the daemon (with ingest enabled, configured from YAML) runs.
func TestWebhookDeliveredThreeTimesMakesOneTask(t *testing.T) {
	sb := sbbitrix.New(sbbitrix.Options{})
	sbURL, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })

	ingestAddr := freeAddr(t)
	const secret = "whsec_test_canary_secret"
	yaml := fmt.Sprintf(`
env: test
data_dir: %q
admin: {addr: "127.0.0.1:0"}
nats: {embedded_addr: %q, fetch_wait: 50ms}
journal: {url: %q}
routes:
  crm.task.create: bitrix24
adapters:
  bitrix24:
    portal_url: %q
    user_id: %q
    webhook_code: %q
ingest:
  enabled: true
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
            - {field: title, value: "Call the customer about the payment"}
            - {field: responsible_id, value: "7"}
            - {field: customer_id, path: data.object.metadata.customer_id}
`, t.TempDir(), freeAddr(t), pgtest.Schema(t), sbURL, sbbitrix.DefaultUserID, sbbitrix.DefaultWebhookCode, ingestAddr, secret)
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, yaml)))
	require.NoError(t, err)
	require.NoError(t, c.validate())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedWriter{w: &bytes.Buffer{}}
	started := make(chan *daemon, 1)
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, c, newLogger(c, logs), func(d *daemon) { started <- d }) }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("daemon ended: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not start")
	}

	body := []byte(`{"id":"evt_1PzXy","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3Pz","amount":125000,"currency":"rub","metadata":{"customer_id":"c-17"}}}}`)
	for i := range 3 {
		ts := time.Now().Unix()
		req, err := http.NewRequest(http.MethodPost, "http://"+ingestAddr+"/webhooks/payments", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", "t="+strconv.FormatInt(ts, 10)+",v1="+ingest.StripeSignature(secret, ts, body))
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "delivery %d", i+1)
	}
	// A tampered delivery is refused and changes nothing.
	req, _ := http.NewRequest(http.MethodPost, "http://"+ingestAddr+"/webhooks/payments", bytes.NewReader(bytes.Replace(body, []byte("c-17"), []byte("c-99"), 1)))
	req.Header.Set("Content-Type", "application/json")
	ts := time.Now().Unix()
	req.Header.Set("Stripe-Signature", "t="+strconv.FormatInt(ts, 10)+",v1="+ingest.StripeSignature(secret, ts, body))
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	require.Eventually(t, func() bool { return sb.TotalEffects() == 1 }, 30*time.Second, 20*time.Millisecond)
	// Nothing more arrives: every delivery was the same command.
	require.Never(t, func() bool { return sb.TotalEffects() > 1 }, time.Second, 50*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.NotContains(t, logs.String(), secret)
}
