// The latency stage: what one agent that waits feels. The daemon serves
// its HTTP API; -latency-calls sequential new-intent charges go through
// it, then through `idemgate mcp` over stdio (the MCP client of the Go SDK
// driving the binary as an agent's host does), beside the same number of
// POSTs straight to the emulator with the same body: p50 / p90 / p99 of
// each and what idemgate adds, with the daemon's own stage timings over
// the HTTP calls (its metrics, before and after). Then -agents concurrent
// agents make -agent-calls calls each through the HTTP API, beside the
// same commands published straight to JetStream and waited for.

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/internal/testkit/childproc"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
)

// latencies are one series of call times.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

func (b *bench) latencyRun() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	st, err := b.freshStage(ctx, "latency", 0, 0, 0)
	if err != nil {
		return err
	}
	httpPort, err := childproc.FreePort()
	if err != nil {
		return err
	}
	adminPort, err := childproc.FreePort()
	if err != nil {
		return err
	}
	const token = "bench-http-token"
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	adminURL := fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	cfgPath, err := b.writeDaemonConfig(st.url, fmt.Sprintf("127.0.0.1:%d", adminPort),
		fmt.Sprintf("http_api:\n  enabled: true\n  addr: 127.0.0.1:%d\n  token: %s\n", httpPort, token))
	if err != nil {
		return err
	}
	var logs bytes.Buffer
	cmd := exec.Command(b.cfg.bin, "run", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if err := childproc.WaitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", httpPort), 30*time.Second); err != nil {
		return fmt.Errorf("%w\ndaemon log (tail):\n%s", err, tail(logs.String(), 30))
	}

	shop, secret := b.sb.Credentials()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t := target{url: b.sbURL, http: client, shop: shop, secret: secret}
	n := b.cfg.latencyCalls
	args := func(intent string, i int) map[string]any {
		return map[string]any{"account_id": "pm-saved-1", "order_id": "order-" + intent, "amount_minor": 1000 + i, "currency": "RUB"}
	}

	// Straight to the emulator: the same body, the operation key as the
	// Idempotence-Key, on a kept-alive connection.
	var direct latencies
	for i := range n {
		intent := fmt.Sprintf("direct-%d", i)
		payload, _ := json.Marshal(args(intent, i))
		c := operation.Command{Operation: opType, IntentID: intent, ApprovalID: "appr-" + intent, Payload: payload}
		key := env + ":" + opType + ":" + intent + ":v1"
		start := time.Now()
		if _, _, err := t.post(ctx, key, &c, key); err != nil {
			return fmt.Errorf("direct POST: %w", err)
		}
		direct = append(direct, time.Since(start))
	}

	// Through the HTTP API, waiting for the outcome.
	call := func(intent string, i int) (time.Duration, error) {
		body := args(intent, i)
		body["approval_id"] = "appr-" + intent
		data, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiURL+"/v1/operations/"+opType, bytes.NewReader(data))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", strconv.Quote(intent))
		req.Header.Set("Prefer", "wait=20")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		var a struct{ Status string }
		derr := json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		took := time.Since(start)
		if derr != nil || a.Status != "succeeded" {
			return 0, fmt.Errorf("HTTP %d, status %q (%v)", resp.StatusCode, a.Status, derr)
		}
		return took, nil
	}
	before, err := scrapeStages(ctx, client, adminURL)
	if err != nil {
		return err
	}
	var viaHTTP latencies
	for i := range n {
		d, err := call(fmt.Sprintf("http-%d", i), i)
		if err != nil {
			return fmt.Errorf("HTTP API: %w\ndaemon log (tail):\n%s", err, tail(logs.String(), 30))
		}
		viaHTTP = append(viaHTTP, d)
	}
	after, err := scrapeStages(ctx, client, adminURL)
	if err != nil {
		return err
	}

	// Through `idemgate mcp` over stdio.
	mcpCmd := exec.Command(b.cfg.bin, "mcp", "--config", cfgPath)
	var mcpLog bytes.Buffer
	mcpCmd.Stderr = &mcpLog
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2ebench", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: mcpCmd}, nil)
	if err != nil {
		return fmt.Errorf("idemgate mcp: %w\n%s", err, tail(mcpLog.String(), 20))
	}
	var viaMCP latencies
	for i := range n {
		intent := fmt.Sprintf("mcp-%d", i)
		a := args(intent, i)
		a["intent_id"], a["approval_id"] = intent, "appr-"+intent
		start := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "payment_charge", Arguments: a})
		took := time.Since(start)
		if err != nil {
			_ = cs.Close()
			return fmt.Errorf("MCP: %w\n%s", err, tail(mcpLog.String(), 20))
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var ans struct{ Status string }
		if json.Unmarshal(raw, &ans) != nil || ans.Status != "succeeded" {
			_ = cs.Close()
			return fmt.Errorf("MCP: %s", raw)
		}
		viaMCP = append(viaMCP, took)
	}
	_ = cs.Close()

	fmt.Printf("latency:      %d sequential new-intent charges each (ms)     p50     p90     p99   added p50  added p99\n", n)
	row := func(name string, l latencies) {
		fmt.Printf("              %-44s %7s %7s %7s", name, ms(l.pct(0.5)), ms(l.pct(0.9)), ms(l.pct(0.99)))
		if name != "POST to the emulator" {
			fmt.Printf("   %8s  %9s", ms(l.pct(0.5)-direct.pct(0.5)), ms(l.pct(0.99)-direct.pct(0.99)))
		}
		fmt.Println()
	}
	row("POST to the emulator", direct)
	row("HTTP API (Prefer: wait)", viaHTTP)
	row("MCP over stdio (idemgate mcp)", viaMCP)
	fmt.Printf("              daemon stages over the HTTP calls (mean ms): %s\n", stageMeans(before, after))

	// Concurrent agents: through the HTTP API, then straight to JetStream.
	agents, per := b.cfg.agents, b.cfg.agentCalls
	conc := func(do func(agent, j int) (time.Duration, error)) (latencies, time.Duration, error) {
		var (
			mu   sync.Mutex
			all  latencies
			werr error
			wg   sync.WaitGroup
		)
		start := time.Now()
		for a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range per {
					d, err := do(a, j)
					mu.Lock()
					if err != nil && werr == nil {
						werr = err
					}
					all = append(all, d)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		return all, time.Since(start), werr
	}
	httpAll, httpTook, err := conc(func(a, j int) (time.Duration, error) {
		return call(fmt.Sprintf("agent-%d-%d", a, j), j)
	})
	if err != nil {
		return fmt.Errorf("concurrent HTTP: %w", err)
	}
	pc, err := producer.New(b.nc, st.ncfg.ResultsStream)
	if err != nil {
		return err
	}
	jsAll, jsTook, err := conc(func(a, j int) (time.Duration, error) {
		intent := fmt.Sprintf("js-agent-%d-%d", a, j)
		payload, _ := json.Marshal(args(intent, j))
		c := operation.Command{EventID: intent, Operation: opType, IntentID: intent, ApprovalID: "appr-" + intent, Payload: payload}
		start := time.Now()
		r, err := pc.PublishAndWait(ctx, c, env+":"+opType+":"+intent+":v1", nil)
		if err != nil {
			return 0, err
		}
		if r.Status != operation.ResultSucceeded {
			return 0, fmt.Errorf("%s: %s", intent, r.Status)
		}
		return time.Since(start), nil
	})
	if err != nil {
		return fmt.Errorf("concurrent JetStream: %w", err)
	}
	total := agents * per
	fmt.Printf("concurrent:   %d agents × %d calls: HTTP API %.0f calls/s, p50 %s ms, p99 %s ms; straight to JetStream %.0f calls/s, p50 %s ms, p99 %s ms\n",
		agents, per, float64(total)/httpTook.Seconds(), ms(httpAll.pct(0.5)), ms(httpAll.pct(0.99)),
		float64(total)/jsTook.Seconds(), ms(jsAll.pct(0.5)), ms(jsAll.pct(0.99)))
	if got, want := b.sb.TotalEffects(), 3*n+2*total; got != want {
		return fmt.Errorf("latency stage: %d payments in the emulator for %d intents", got, want)
	}
	return nil
}

// stageSums are a histogram's sum and count per series, from /metrics.
type stageSums map[string][2]float64

// stageSeries are the daemon's stage histograms the latency stage reads.
var stageSeries = []string{"idemgate_command_duration_seconds", "idemgate_journal_batch_duration_seconds", "idemgate_adapter_call_duration_seconds"}

func scrapeStages(ctx context.Context, c *http.Client, adminURL string) (stageSums, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, adminURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := stageSums{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		for _, s := range stageSeries {
			for i, suffix := range []string{"_sum", "_count"} {
				if !strings.HasPrefix(line, s+suffix) {
					continue
				}
				name, value, ok := strings.Cut(line, " ")
				if !ok {
					continue
				}
				v, err := strconv.ParseFloat(value, 64)
				if err != nil {
					continue
				}
				series := strings.TrimPrefix(strings.Replace(name, suffix, "", 1), "idemgate_")
				e := out[series]
				e[i] = v
				out[series] = e
			}
		}
	}
	return out, sc.Err()
}

// stageMeans are the mean of each series over the calls between two
// scrapes.
func stageMeans(before, after stageSums) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		d := after[k]
		b := before[k]
		if n := d[1] - b[1]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", k, ms(time.Duration((d[0]-b[0])/n*float64(time.Second)))))
		}
	}
	return strings.Join(parts, "; ")
}

// writeDaemonConfig writes the daemon's configuration for a stage's
// journal, its admin listener (""
// for none) and extra YAML.
func (b *bench) writeDaemonConfig(journalURL, adminAddr, extra string) (string, error) {
	shop, secret := b.sb.Credentials()
	p := filepath.Join(b.dir, "idemgate.yaml")
	yaml := fmt.Sprintf(`env: %s
data_dir: %q
log:
  level: warn
admin:
  addr: %q
nats:
  url: %s
journal:
  url: %q
approvals:
  enabled: false
routes:
  payment.charge: yookassa
adapters:
  yookassa:
    base_url: %s
    shop_id: %s
    secret_key: %s
    # A lookup reads the payments made while the key's calls ran, within
    # lookup_skew of them (then the rest, when none matches): the journal
    # (PostgreSQL's now()) and the emulator share this machine's clock, so
    # the allowance for skew can be small and the scans short.
    lookup_skew: 100ms
    lookup_max_pages: 200
%s`, env, filepath.Join(b.dir, "data"), adminAddr, b.natsURL, journalURL, b.sbURL, shop, secret, extra)
	return p, os.WriteFile(p, []byte(yaml), 0o600)
}
