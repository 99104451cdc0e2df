package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/ingest"
)

// BenchmarkIngest measures signed Stripe webhooks through the real HTTP
// server to PubAck (the 200 is written only after JetStream acknowledged),
// against the embedded server with a file-backed stream, 16 concurrent
// senders on keep-alive connections. The baseline is the same publish
// (same subject, payload size and Nats-Msg-Id) straight from a JetStream
// client at the same concurrency, and the same HTTP requests against a no-op
// handler (the transport's floor), both measured in the same run.
//
//	go test -run '^$' -bench BenchmarkIngest -benchtime 5s ./ingest/
func BenchmarkIngest(b *testing.B) {
	bd := setup(b, setupOpts{cfg: func(c *ingest.Config) { c.Addr = "127.0.0.1:0" }, logLevel: slog.LevelInfo})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := bd.srv.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer bd.srv.Stop()
	url := "http://" + bd.srv.Addr() + "/webhooks/stripe"
	var seq atomic.Uint64
	const parallelism = 8 // × GOMAXPROCS senders

	// The floor of the transport: the same client and requests against a
	// handler that only reads the body and answers 200.
	noop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "OK")
	}))
	defer noop.Close()
	b.Run("baseline_http_noop", func(b *testing.B) {
		benchHTTP(b, noop.URL+"/webhooks/stripe", &seq, parallelism)
	})
	b.Run("http_to_puback", func(b *testing.B) {
		benchHTTP(b, url, &seq, parallelism)
	})
	b.Run("baseline_jetstream_publish", func(b *testing.B) {
		body := stripeEvent("evt_bench_0000000", "payment_intent.succeeded", "cust-1")
		lat := newLatencies()
		b.SetParallelism(parallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var mine []time.Duration
			for pb.Next() {
				n := seq.Add(1)
				msg := nats.NewMsg("idemgate.cmd.crm.task.create")
				msg.Data = body
				start := time.Now()
				_, err := bd.js.PublishMsg(context.Background(), msg,
					jetstream.WithMsgID(fmt.Sprintf("stripe:evt_bench_%d", n)), jetstream.WithExpectStream("IDEMGATE_COMMANDS"))
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(start))
			}
			lat.add(mine)
		})
		b.StopTimer()
		lat.report(b, "publishes/s")
	})
}

// benchHTTP posts signed Stripe webhooks to url from parallelism×GOMAXPROCS
// senders and reports the rate and latency percentiles.
func benchHTTP(b *testing.B, url string, seq *atomic.Uint64, parallelism int) {
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	lat := newLatencies()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			n := seq.Add(1)
			body := stripeEvent(fmt.Sprintf("evt_bench_%d", n), "payment_intent.succeeded", "cust-1")
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header = stripeHeader(stripeNew, fixedNow, body)
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mine = append(mine, time.Since(start))
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
		lat.add(mine)
	})
	b.StopTimer()
	lat.report(b, "webhooks/s")
}

type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func newLatencies() *latencies { return &latencies{} }

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, d...)
}

func (l *latencies) report(b *testing.B, rateUnit string) {
	if len(l.all) == 0 {
		return
	}
	slices.Sort(l.all)
	pct := func(p float64) float64 {
		return float64(l.all[int(float64(len(l.all)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), rateUnit)
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
