package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/gateway/httpapi"
	"github.com/idemgate/idemgate/internal/telemetry/otelsetup"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
)

const token = "test-token-for-the-http-api"

type bundle struct {
	d   *daemontest.Daemon
	url string
}

func setup(t *testing.T, engine string, cfg gateway.Config) *bundle {
	t.Helper()
	d := daemontest.Start(t, engine)
	cfg.Env = daemontest.Env
	if cfg.Wait == 0 {
		cfg.Wait = 20 * time.Second
	}
	g, err := gateway.New(cfg, gateway.Deps{NC: d.NC, Journal: d.Journal})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv := httptest.NewServer(httpapi.Handler(g, httpapi.Config{Token: redact.Secret(token), MaxBody: 4096}))
	t.Cleanup(srv.Close)
	return &bundle{d: d, url: srv.URL}
}

// response is an HTTP answer: status, headers and the body's answer (the
// body itself, or a problem's "answer" member).
type response struct {
	code    int
	header  http.Header
	answer  gateway.Answer
	problem map[string]any
}

func do(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := response{code: resp.StatusCode, header: resp.Header}
	switch ct := resp.Header.Get("Content-Type"); ct {
	case "application/json":
		require.NoError(t, json.Unmarshal(body, &r.answer), "%s", body)
	case "application/problem+json":
		require.NoError(t, json.Unmarshal(body, &r.problem), "%s", body)
		require.Equal(t, float64(resp.StatusCode), r.problem["status"], "RFC 9457: status repeats the code")
		require.NotEmpty(t, r.problem["type"])
		require.NotEmpty(t, r.problem["title"])
		if a, ok := r.problem["answer"]; ok {
			b, _ := json.Marshal(a)
			require.NoError(t, json.Unmarshal(b, &r.answer))
			require.Equal(t, r.answer.Reason, r.problem["detail"])
		}
	default:
		t.Fatalf("content type %q: %s", ct, body)
	}
	return r
}

func post(t *testing.T, b *bundle, op, key, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+"/v1/operations/"+op, strings.NewReader(body))
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

func get(t *testing.T, b *bundle, path string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	return do(t, req)
}

func chargeBody(order string, amount int64) string {
	return fmt.Sprintf(`{"account_id":"merchant-account-17","order_id":%q,"amount_minor":%d,"currency":"RUB"}`, order, amount)
}

// TestHTTPPaymentCharge: the guarantee through the HTTP API, counted in the
// YooKassa ledger, on both journals.
func TestHTTPPaymentCharge(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			b := setup(t, engine, gateway.Config{PollAfter: 200 * time.Millisecond})
			y := b.d.YooKassa

			// One intent twice: 200 both times, one charge, the second a replay.
			first := post(t, b, "payment.charge", `"http-1"`, chargeBody("order-1", 125000), "Idempotency-Approval", "appr-1")
			require.Equal(t, http.StatusOK, first.code, "%+v", first)
			require.Equal(t, gateway.StatusSucceeded, first.answer.Status)
			require.Equal(t, gateway.Done, first.answer.NextAction)
			require.Empty(t, first.header.Get("Idempotent-Replayed"))
			second := post(t, b, "payment.charge", `"http-1"`, chargeBody("order-1", 125000), "Idempotency-Approval", "appr-1")
			require.Equal(t, http.StatusOK, second.code)
			require.Equal(t, "true", second.header.Get("Idempotent-Replayed"))
			require.True(t, second.answer.Replayed)
			require.Equal(t, first.answer.TargetObjectID, second.answer.TargetObjectID)
			require.Equal(t, 1, y.TotalEffects())

			// The key reused with another amount: 409, a new intent is required.
			changed := post(t, b, "payment.charge", `"http-1"`, chargeBody("order-1", 500000), "Idempotency-Approval", "appr-1")
			require.Equal(t, http.StatusConflict, changed.code, "%+v", changed)
			require.Equal(t, httpapi.ProblemType("conflict"), changed.problem["type"])
			require.Equal(t, gateway.NewIntentRequired, changed.answer.NextAction)
			require.Equal(t, []string{"amount_minor"}, changed.answer.ConflictFields)
			require.Contains(t, changed.problem["detail"], "amount_minor differs")
			require.Equal(t, 1, y.TotalEffects())

			// A lost response: 202 with Location and Retry-After; GET there
			// until reconciliation settles it.
			require.NoError(t, y.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1}))
			lost := post(t, b, "payment.charge", "http-lost", `{"account_id":"merchant-account-17","order_id":"order-2","amount_minor":99000,"currency":"RUB","approval_id":"appr-2"}`,
				"Prefer", "wait=0")
			require.Equal(t, http.StatusAccepted, lost.code, "%+v", lost)
			require.Equal(t, "wait=0", lost.header.Get("Preference-Applied"))
			require.Equal(t, "/v1/operations/test:payment.charge:http-lost:v1", lost.header.Get("Location"))
			require.Equal(t, "1", lost.header.Get("Retry-After"))
			require.Equal(t, gateway.Poll, lost.answer.NextAction)
			var got response
			deadline := time.Now().Add(30 * time.Second)
			for {
				got = get(t, b, lost.header.Get("Location"))
				if got.answer.Status != gateway.StatusPending || time.Now().After(deadline) {
					break
				}
				require.Equal(t, http.StatusOK, got.code)
				require.NotEmpty(t, got.header.Get("Retry-After"))
				time.Sleep(time.Duration(got.answer.RetryAfterMS) * time.Millisecond) // as next_action poll says
			}
			require.Equal(t, http.StatusOK, got.code)
			require.Equal(t, gateway.StatusSucceeded, got.answer.Status, "%+v", got.answer)
			require.Equal(t, gateway.Done, got.answer.NextAction)
			require.NotEmpty(t, got.answer.Trail)
			require.Equal(t, 2, y.TotalEffects(), "two intents, two charges")

			// 20 concurrent requests of one intent: one charge, 20 identical ids.
			codes := make([]int, 20)
			ids := make([]string, 20)
			var wg sync.WaitGroup
			for i := range codes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/operations/payment.charge", strings.NewReader(chargeBody("order-3", 4200)))
					req.Header.Set("Authorization", "Bearer "+token)
					req.Header.Set("Idempotency-Key", "http-race")
					req.Header.Set("Idempotency-Approval", "appr-3")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return
					}
					defer resp.Body.Close()
					var a gateway.Answer
					_ = json.NewDecoder(resp.Body).Decode(&a)
					codes[i], ids[i] = resp.StatusCode, a.TargetObjectID
				}()
			}
			wg.Wait()
			for i := range codes {
				require.Equal(t, http.StatusOK, codes[i], "request %d", i)
				require.NotEmpty(t, ids[i])
				require.Equal(t, ids[0], ids[i], "request %d", i)
			}
			require.Equal(t, 3, y.TotalEffects(), "three intents, three charges")
		})
	}
}

// TestHTTPErrors: every refusal is problem+json with its code, and none
// reaches the target.
func TestHTTPErrors(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{PublishTimeout: 500 * time.Millisecond})
	good := chargeBody("order-9", 100)

	noKey := post(t, b, "payment.charge", "", good, "Idempotency-Approval", "a")
	require.Equal(t, http.StatusBadRequest, noKey.code)
	require.Equal(t, gateway.FixInput, noKey.answer.NextAction)
	require.Contains(t, noKey.answer.Reason, "Idempotency-Key")

	badQuote := post(t, b, "payment.charge", `"unterminated`, good, "Idempotency-Approval", "a")
	require.Equal(t, http.StatusBadRequest, badQuote.code)

	decimal := post(t, b, "payment.charge", "err-1", `{"account_id":"a","order_id":"o","amount_minor":1.5,"currency":"RUB"}`, "Idempotency-Approval", "a")
	require.Equal(t, http.StatusUnprocessableEntity, decimal.code)
	require.Equal(t, gateway.StatusRejected, decimal.answer.Status)
	require.Equal(t, gateway.FixInput, decimal.answer.NextAction)
	require.Contains(t, decimal.answer.Reason, "payload.amount_minor")

	// approval_id is optional and authorises nothing (the approval policy
	// decides whether a charge waits; it is off here).
	noApproval := post(t, b, "payment.charge", "err-2", good)
	require.Equal(t, gateway.StatusSucceeded, noApproval.answer.Status, noApproval.answer.Reason)

	twoApprovals := post(t, b, "payment.charge", "err-3", `{"account_id":"a","order_id":"o","amount_minor":1,"currency":"RUB","approval_id":"x"}`,
		"Idempotency-Approval", "y")
	require.Equal(t, http.StatusUnprocessableEntity, twoApprovals.code)

	unknownOp := post(t, b, "payment.teleport", "err-4", good)
	require.Equal(t, http.StatusNotFound, unknownOp.code)
	require.Contains(t, unknownOp.answer.Reason, "payment.charge")

	tooLarge := post(t, b, "payment.charge", "err-5", `{"description":"`+strings.Repeat("x", 5000)+`"}`, "Idempotency-Approval", "a")
	require.Equal(t, http.StatusRequestEntityTooLarge, tooLarge.code)
	require.Equal(t, "too_large", tooLarge.answer.ErrorCode)

	form := post(t, b, "payment.charge", "err-6", "a=b", "Content-Type", "application/x-www-form-urlencoded")
	require.Equal(t, http.StatusUnsupportedMediaType, form.code)

	unknownKey := get(t, b, "/v1/operations/test:payment.charge:never:v1")
	require.Equal(t, http.StatusNotFound, unknownKey.code)
	require.Equal(t, gateway.StatusNotFound, unknownKey.answer.Status)
	badKey := get(t, b, "/v1/operations/nonsense")
	require.Equal(t, http.StatusBadRequest, badKey.code)

	req, _ := http.NewRequest(http.MethodDelete, b.url+"/v1/operations/x", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	del := do(t, req)
	require.Equal(t, http.StatusMethodNotAllowed, del.code)
	require.Equal(t, "GET, POST", del.header.Get("Allow"))

	for name, auth := range map[string]string{"no token": "", "wrong token": "Bearer wrong", "basic": "Basic " + token} {
		req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/operations/payment.charge", strings.NewReader(good))
		req.Header.Set("Idempotency-Key", "err-7")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		r := do(t, req)
		require.Equal(t, http.StatusUnauthorized, r.code, name)
		require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer", name)
	}
	require.Equal(t, 1, b.d.YooKassa.TotalEffects(), "no refusal charged anything: the one charge is err-2, accepted without approval_id")
	_, err := b.d.Journal.Get(context.Background(), "test:payment.charge:err-7:v1")
	require.Error(t, err, "an unauthorized request is never published")

	b.d.NATS.Shutdown()
	down := post(t, b, "payment.charge", "err-8", good, "Idempotency-Approval", "a")
	require.Equal(t, http.StatusServiceUnavailable, down.code)
	require.Equal(t, "1", down.header.Get("Retry-After"))
	require.Equal(t, gateway.RetrySameIntent, down.answer.NextAction)
}

// TestHTTPPreferWait: Prefer: wait=N bounds the wait, capped at max_wait.
func TestHTTPPreferWait(t *testing.T) {
	b := setup(t, daemontest.SQLite, gateway.Config{Wait: time.Second, MaxWait: 2 * time.Second})
	r := post(t, b, "payment.charge", "wait-1", chargeBody("order-10", 100), "Idempotency-Approval", "a", "Prefer", "respond-async, wait=30")
	require.Equal(t, "wait=2", r.header.Get("Preference-Applied"))
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, 1, b.d.YooKassa.TotalEffects())
}

// TestHTTPContinuesTheAgentsTrace: with tracing on, a POST carrying the
// agent's traceparent publishes its command under a span that is the
// agent's span's child, in the agent's trace, and the charge is made once.
// Not parallel: it installs the global tracer provider.
func TestHTTPContinuesTheAgentsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p := otelsetup.Install(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })

	b := setup(t, daemontest.Engines[0], gateway.Config{PollAfter: 200 * time.Millisecond})
	const agentTrace, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := post(t, b, "payment.charge", `"http-traced-1"`, chargeBody("order-traced-1", 4200),
		"Idempotency-Approval", "appr-traced-1", "traceparent", "00-"+agentTrace+"-"+agentSpan+"-01")
	require.Equal(t, http.StatusOK, r.code, "%+v", r)
	require.Equal(t, 1, b.d.YooKassa.TotalEffects())

	var publish []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		publish = publish[:0]
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == "publish idemgate.cmd.payment.charge" {
				publish = append(publish, s)
			}
		}
		return len(publish) > 0
	}, 10*time.Second, 20*time.Millisecond)
	require.Len(t, publish, 1)
	s := publish[0]
	require.Equal(t, trace.SpanKindProducer, s.SpanKind())
	require.Equal(t, agentTrace, s.SpanContext().TraceID().String(), "the command joins the agent's trace")
	require.Equal(t, agentSpan, s.Parent().SpanID().String(), "its publish is the agent's span's child")
	require.True(t, s.Parent().IsRemote())
}
