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
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/gateway/httpapi"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/redact"
)

// benchCommands and benchClients: 1,000 commands, a fifth of them repeats
// of an earlier intent (an agent retrying), sent by this many agents at once.
const (
	benchRepeat  = 5 // every 5th command repeats an intent: 20 %
	benchClients = 128
)

// benchCommands is 1,000, or 200 with -short: enough to exercise both
// paths when scripts/test runs every benchmark once.
func benchCommands() int {
	if testing.Short() {
		return 200
	}
	return 1000
}

// benchCall is one command of the workload: the intent and its payload.
type benchCall struct {
	intent, order string
}

// workload is 1,000 calls, 800 intents; each repeat follows its original.
func workload(prefix string) []benchCall {
	calls := make([]benchCall, 0, benchCommands())
	for i := 0; len(calls) < benchCommands(); i++ {
		c := benchCall{intent: fmt.Sprintf("%s-%d", prefix, i), order: fmt.Sprintf("order-%s-%d", prefix, i)}
		calls = append(calls, c)
		if (i+1)%(benchRepeat-1) == 0 && len(calls) < benchCommands() {
			calls = append(calls, c) // the agent retries this intent
		}
	}
	return calls
}

// BenchmarkHTTPFaceVersusJetStream sends the same workload — 1,000 charges,
// 20 % of them repeats — once straight to JetStream through producer (each
// agent publishes a command and awaits its result on a reply subject; a
// repeat is a new event id for the same intent, which the daemon replays)
// and once as HTTP POSTs with Idempotency-Key through the gateway, against
// one daemon in one run, and reports both rates and their ratio. Rounds
// alternate the order so that neither side always runs on a warmer daemon.
//
//	go test -run '^$' -bench HTTPFace -benchtime=1x ./gateway/httpapi/
func BenchmarkHTTPFaceVersusJetStream(b *testing.B) {
	for _, engine := range daemontest.Engines {
		b.Run(engine, func(b *testing.B) {
			d := daemontest.Start(b, engine)
			g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 30 * time.Second, MaxWait: 30 * time.Second},
				gateway.Deps{NC: d.NC, Journal: d.Journal})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(g.Close)
			srv := httptest.NewServer(httpapi.Handler(g, httpapi.Config{Token: redact.Secret(token)}))
			b.Cleanup(srv.Close)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients, MaxConnsPerHost: benchClients}}
			b.Cleanup(client.CloseIdleConnections)
			prod, err := producer.New(d.NC, "")
			if err != nil {
				b.Fatal(err)
			}
			var jsTime, httpTime time.Duration
			round := 0
			run := func(name string, send func(context.Context, benchCall, int) error) time.Duration {
				round++
				calls := workload(fmt.Sprintf("%s%d-%d", name, round, time.Now().UnixNano()%1e6))
				t0 := time.Now()
				if err := drive(calls, send); err != nil {
					b.Fatalf("%s: %v", name, err)
				}
				return time.Since(t0)
			}
			jsSend := func(ctx context.Context, c benchCall, i int) error {
				cmd := operation.Command{EventID: fmt.Sprintf("evt-%s-%d", c.intent, i), Operation: "payment.charge", IntentID: c.intent,
					ApprovalID: "appr-1", Payload: json.RawMessage(chargeBody(c.order, 1000))}
				r, err := prod.PublishAndWait(ctx, cmd, "", nil)
				if err != nil {
					return err
				}
				if r.Status != operation.ResultSucceeded {
					return fmt.Errorf("%s: %s %s", c.intent, r.Status, r.ErrorCode)
				}
				return nil
			}
			httpSend := func(ctx context.Context, c benchCall, _ int) error {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/operations/payment.charge", strings.NewReader(chargeBody(c.order, 1000)))
				if err != nil {
					return err
				}
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", c.intent)
				req.Header.Set("Idempotency-Approval", "appr-1")
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("%s: %d %s", c.intent, resp.StatusCode, body)
				}
				return nil
			}
			// Warm both paths (connections, prepared statements) before timing.
			run("warm-js", jsSend)
			run("warm-http", httpSend)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					jsTime += run("js", jsSend)
					httpTime += run("http", httpSend)
				} else {
					httpTime += run("http", httpSend)
					jsTime += run("js", jsSend)
				}
			}
			b.StopTimer()
			if want := round * benchCommands() * (benchRepeat - 1) / benchRepeat; d.YooKassa.TotalEffects() != want {
				b.Fatalf("%d charges in the ledger for %d intents", d.YooKassa.TotalEffects(), want)
			}
			jsRate := float64(b.N*benchCommands()) / jsTime.Seconds()
			httpRate := float64(b.N*benchCommands()) / httpTime.Seconds()
			b.ReportMetric(jsRate, "jetstream_cmds/s")
			b.ReportMetric(httpRate, "http_cmds/s")
			b.ReportMetric(httpRate/jsRate, "http/jetstream")
		})
	}
}

// drive sends calls from benchClients agents at once; a repeat is sent
// only after its original was answered (an agent retries after an answer
// or a timeout, not before sending).
func drive(calls []benchCall, send func(context.Context, benchCall, int) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	answered := make(map[string]chan struct{}, len(calls))
	for _, c := range calls {
		if _, ok := answered[c.intent]; !ok {
			answered[c.intent] = make(chan struct{})
		}
	}
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	seen := make([]bool, len(calls)) // a repeat of an earlier call
	first := map[string]bool{}
	for i, c := range calls {
		seen[i] = first[c.intent]
		first[c.intent] = true
	}
	var wg sync.WaitGroup
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(calls) || ctx.Err() != nil {
					return
				}
				c := calls[i]
				if seen[i] {
					select {
					case <-answered[c.intent]:
					case <-ctx.Done():
						return
					}
				}
				if err := send(ctx, c, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				if !seen[i] {
					close(answered[c.intent])
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
