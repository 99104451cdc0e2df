package adapters_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// BenchmarkClientJSON is one adapter exchange on a kept-alive connection:
// a JSON body encoded and POSTed with a key, a 700-byte JSON answer (the
// size of a YooKassa payment) read back.
//
//	go test -run '^$' -bench ClientJSON -benchmem -count=6 ./adapters/
func BenchmarkClientJSON(b *testing.B) {
	answer := `{"id":"2d0e9b4c-000f-5000-8000-1a2b3c4d5e6f","status":"succeeded","paid":true,` +
		`"amount":{"value":"1250.00","currency":"RUB"},"created_at":"2026-12-03T09:00:00.000Z","metadata":{` +
		`"idemgate_key":"prod:payment.charge:intent-1:v1","idemgate_order_id":"order-1","idemgate_approval_id":"appr-1"},` +
		`"payment_method":{"type":"bank_card","id":"pm-saved-1","saved":true,"title":"Bank card *4444"},` +
		`"recipient":{"account_id":"100500","gateway_id":"100700"},"refundable":true,"test":true,"income_amount":` +
		`{"value":"1206.25","currency":"RUB"},"description":"Order order-1","authorization_details":{"rrn":"603668680243","auth_code":"000000"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		_, _ = w.Write([]byte(answer))
	}))
	b.Cleanup(srv.Close)
	c := adapters.HTTPConfig{Timeout: 5 * time.Second}.NewClient(nil)
	body := map[string]any{"amount": map[string]string{"value": "1250.00", "currency": "RUB"}, "capture": true,
		"payment_method_id": "pm-saved-1", "description": "Order order-1",
		"metadata": map[string]string{"idemgate_key": "prod:payment.charge:intent-1:v1", "idemgate_order_id": "order-1"}}
	hdr := http.Header{"Idempotence-Key": {"prod:payment.charge:intent-1:v1"}}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.JSON(context.Background(), http.MethodPost, srv.URL+"/v3/payments", body, hdr)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(resp.Body), `{"id"`) {
			b.Fatalf("HTTP %d %s", resp.StatusCode, resp.Body)
		}
	}
}
