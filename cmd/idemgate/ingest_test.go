package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/operation"
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
`, t.TempDir(), "127.0.0.1:0", pgtest.Schema(t), sbURL, sbbitrix.DefaultUserID, sbbitrix.DefaultWebhookCode, "127.0.0.1:0", secret)
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, yaml)))
	require.NoError(t, err)
	require.NoError(t, c.validate())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedWriter{w: &bytes.Buffer{}}
	started := make(chan *daemon, 1)
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, c, newLogger(c, logs), func(d *daemon) { started <- d }) }()
	var ingestAddr, natsAddr string // the ports the daemon took
	select {
	case d := <-started:
		ingestAddr, natsAddr = d.ingest.Addr(), d.natsAddr
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

	// Wait until the pipeline has drained: every command the deliveries put
	// in the stream was acknowledged by the daemon, which acks only after
	// the command's effect and result. Nothing can act after that, so the
	// counts below are final.
	nc, err := nats.Connect("nats://" + natsAddr)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var commands uint64
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "IDEMGATE_COMMANDS")
		if err != nil {
			return false
		}
		si, err := st.Info(ctx)
		if err != nil {
			return false
		}
		cons, err := st.Consumer(ctx, "idemgate-worker")
		if err != nil {
			return false
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			return false
		}
		commands = si.State.LastSeq
		return commands > 0 && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream == si.State.LastSeq
	}, 60*time.Second, 20*time.Millisecond, "the daemon did not ack every command")
	require.Equal(t, uint64(1), commands, "three deliveries of one webhook are one command")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	res, err := js.Stream(ctx2, "IDEMGATE_RESULTS")
	require.NoError(t, err)
	rm, err := res.GetLastMsgForSubject(ctx2, "idemgate.res.crm.task.create")
	require.NoError(t, err)
	var r operation.Result
	require.NoError(t, json.Unmarshal(rm.Data, &r))
	require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
	require.Equal(t, 1, sb.TotalEffects(), "one task in the Bitrix24 sandbox")
	require.Equal(t, 1, sb.Effects(r.OperationKey))
	cancel()
	require.NoError(t, <-done)
	require.NotContains(t, logs.String(), secret)
}
