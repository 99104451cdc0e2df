package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/gateway/httpapi"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/redact"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

func setupProcesses(t *testing.T, engine string) *bundle {
	t.Helper()
	d := daemontest.StartWith(t, engine, daemontest.Options{Processes: map[string]process.Decl{"order.checkout": daemontest.Checkout()}})
	d.StartCoordinator(t, "coord-http", nil)
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 30 * time.Second, PollAfter: 100 * time.Millisecond},
		gateway.Deps{NC: d.NC, Journal: d.Journal, Processes: d.Processes})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv := httptest.NewServer(httpapi.Handler(g, httpapi.Config{Token: redact.Secret(token), MaxBody: 4096}))
	t.Cleanup(srv.Close)
	return &bundle{d: d, url: srv.URL}
}

func postProcess(t *testing.T, b *bundle, name, key, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+httpapi.ProcessPrefix+name, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return do(t, req)
}

func checkoutBody(order, account, responsible string) string {
	return fmt.Sprintf(`{"order_id":%q,"customer_id":"cust-17","account_id":%q,"amount_minor":125000,"currency":"RUB","responsible_id":%q}`,
		order, account, responsible)
}

func processView(t *testing.T, a gateway.Answer) process.View {
	t.Helper()
	var v process.View
	require.NoError(t, json.Unmarshal(a.Result, &v), "%s", a.Result)
	return v
}

// TestHTTPProcesses: POST /v1/processes/{name} with an Idempotency-Key runs
// a declared process once; a retry is a replay; GET /v1/processes/{key}
// reads its state with each step's status, key and object; a declined
// charge answers failed_final once compensated; a caller that does not
// wait is answered 202 with the process's Location and polls it. Effects
// are counted in the emulators' ledgers.
func TestHTTPProcesses(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			b := setupProcesses(t, engine)
			first := postProcess(t, b, "order.checkout", `"checkout-1"`, checkoutBody("checkout-1", "card-ok", "12"), "Idempotency-Approval", "appr-1")
			require.Equal(t, http.StatusOK, first.code, "%+v", first)
			require.Equal(t, gateway.StatusSucceeded, first.answer.Status)
			require.Equal(t, gateway.Done, first.answer.NextAction)
			require.Equal(t, "test:process.order.checkout:checkout-1:v1", first.answer.OperationKey)
			v := processView(t, first.answer)
			require.Equal(t, journal.ProcessSucceeded, v.Status)
			for _, s := range v.Steps {
				require.Equal(t, "succeeded", s.Status, s.Name)
				require.NotEmpty(t, s.OperationKey)
				require.NotEmpty(t, s.TargetObjectID)
				require.Contains(t, first.answer.Reason, s.TargetObjectID)
			}
			again := postProcess(t, b, "order.checkout", `"checkout-1"`, checkoutBody("checkout-1", "card-ok", "12"), "Idempotency-Approval", "appr-1")
			require.Equal(t, http.StatusOK, again.code)
			require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
			require.Equal(t, v, processView(t, again.answer))
			require.Equal(t, 1, b.d.OneC.TotalEffects())
			require.Equal(t, 1, b.d.YooKassa.TotalEffects())
			require.Equal(t, 1, b.d.Bitrix24.TotalEffects())

			read := get(t, b, httpapi.ProcessPrefix+first.answer.OperationKey)
			require.Equal(t, http.StatusOK, read.code)
			require.Equal(t, string(journal.ProcessSucceeded), read.answer.JournalStatus)
			require.Equal(t, v, processView(t, read.answer))
			byOps := get(t, b, httpapi.Prefix+first.answer.OperationKey)
			require.Equal(t, read.answer.Result, byOps.answer.Result, "one story on either path")

			// Changed input under the same key: 409, nothing runs.
			changed := postProcess(t, b, "order.checkout", `"checkout-1"`, checkoutBody("checkout-1", "card-other", "12"), "Idempotency-Approval", "appr-1")
			require.Equal(t, http.StatusConflict, changed.code, "%+v", changed)
			require.Equal(t, gateway.NewIntentRequired, changed.answer.NextAction)

			declined := postProcess(t, b, "order.checkout", `"checkout-2"`, checkoutBody("checkout-2", sbyookassa.MethodDeclined, "12"), "Idempotency-Approval", "appr-2")
			require.Equal(t, http.StatusOK, declined.code, "%+v", declined)
			require.Equal(t, gateway.StatusFailedFinal, declined.answer.Status)
			require.Equal(t, "declined", declined.answer.ErrorCode)
			require.Equal(t, journal.ProcessCompensated, processView(t, declined.answer).Status)
			require.Contains(t, declined.answer.Reason, "step charge was refused for good (declined)")
			require.Contains(t, declined.answer.Reason, "invoice: invoice.cancel")
			require.Equal(t, 3, b.d.OneC.TotalEffects(), "the second invoice, and one document cancelling it")

			// Not waiting: 202, Location the process; polling reads it to its end.
			late := postProcess(t, b, "order.checkout", `"checkout-3"`, checkoutBody("checkout-3", "card-ok", "12"), "Idempotency-Approval", "appr-3",
				"Prefer", "wait=0")
			require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, late.code, "%+v", late)
			if late.code == http.StatusAccepted {
				loc := late.header.Get("Location")
				require.Equal(t, httpapi.ProcessPrefix+"test:process.order.checkout:checkout-3:v1", loc)
				require.Equal(t, gateway.Poll, late.answer.NextAction)
				deadline := time.Now().Add(60 * time.Second)
				for {
					r := get(t, b, loc)
					if r.answer.Status != gateway.StatusPending {
						require.Equal(t, gateway.StatusSucceeded, r.answer.Status, "%+v", r)
						break
					}
					require.True(t, time.Now().Before(deadline), "the process never settled: %+v", r)
					time.Sleep(time.Duration(r.answer.RetryAfterMS) * time.Millisecond)
				}
			}

			missing := postProcess(t, b, "order.checkout", "", checkoutBody("x", "card-ok", "12"), "Idempotency-Approval", "appr-1")
			require.Equal(t, http.StatusBadRequest, missing.code)
			unknown := postProcess(t, b, "order.return", `"r-1"`, `{}`)
			require.Equal(t, http.StatusNotFound, unknown.code)
			none := get(t, b, httpapi.ProcessPrefix+"test:process.order.checkout:never:v1")
			require.Equal(t, http.StatusNotFound, none.code)
		})
	}
}
