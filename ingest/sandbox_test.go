package ingest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	ykemu "github.com/idemgate/idemgate/sandbox/yookassa"
)

// TestYooKassaEmulatorRefetch runs the re-fetch against the project's
// YooKassa emulator: a notification that runs ahead of the provider's state
// is not trusted; once the payment settles, the redelivery is published with
// the provider's copy of the payment.
func TestYooKassaEmulatorRefetch(t *testing.T) {
	t.Parallel()
	emu := ykemu.New(ykemu.Options{Pending: true})
	api := httptest.NewServer(emu.Handler())
	t.Cleanup(api.Close)
	shop, key := emu.Credentials()
	b := setup(t, setupOpts{cfg: func(c *ingest.Config) {
		c.Sources[3].Refetch = ingest.YooKassaConfig{API: api.URL + "/v3", ShopID: shop, SecretKey: redact.Secret(key)}
	}})

	// A payment made at the emulator, still pending.
	req, err := http.NewRequest(http.MethodPost, api.URL+"/v3/payments", bytes.NewReader([]byte(
		`{"amount":{"value":"250.00","currency":"RUB"},"capture":true,"payment_method_id":"pm-saved-1",`+
			`"metadata":{"order_id":"order-501","customer_id":"cust-77"}}`)))
	require.NoError(t, err)
	req.SetBasicAuth(shop, key)
	req.Header.Set("Idempotence-Key", "op-test-501")
	req.Header.Set("Content-Type", "application/json")
	resp, err := api.Client().Do(req)
	require.NoError(t, err)
	var pay map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&pay))
	resp.Body.Close()
	require.Equal(t, "pending", pay["status"])
	id := pay["id"].(string)

	// A "succeeded" notification while the provider still says pending.
	pay["status"] = "succeeded"
	obj, _ := json.Marshal(pay)
	note := yookassaNotification("payment.succeeded", string(obj))
	require.Equal(t, http.StatusConflict, b.post(t, "yookassa", note, nil, yookassaAddr).Code)
	require.Equal(t, uint64(0), b.msgs(t))

	// The payment settles; YooKassa redelivers the notification.
	emu.Settle()
	rec := b.post(t, "yookassa", note, nil, yookassaAddr)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, uint64(1), b.msgs(t))
	op, err := (&operation.Decoder{Env: "prod"}).Decode(b.last(t, "idemgate.cmd.invoice.create").Data)
	require.NoError(t, err)
	require.Equal(t, "prod:invoice.create:yookassa:payment.succeeded:"+id+":v1", op.Key.String())
	require.Equal(t, int64(25000), op.Int("amount_minor"))
	require.Equal(t, "cust-77", op.String("customer_id"))
	require.Equal(t, "order-501", op.String("order_id"))
}
