package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/internal/testkit/childproc"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/redact"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/worker"
)

func flagsWith(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, f := range []string{"config", "env", "data-dir", "nats-url", "journal-url", "log-level", "log-format"} {
		fs.String(f, "", "")
	}
	require.NoError(t, fs.Parse(args))
	return fs
}

// testDefaults is defaults() with approvals off, for the in-process
// daemons of the tests that are not about approvals: they send charges and
// refunds, which by default wait for a person.
func testDefaults() Config {
	c := defaults()
	c.Approvals.Enabled = false
	return c
}

// writeConfig writes yaml as a daemon's file. A file without an
// approvals: section gets `approvals: {enabled: false}`: the tests that
// are not about approvals send charges and refunds, which by default wait
// for a person (TestMoneyWaitsForAPersonByDefault holds the default).
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	if !strings.Contains(yaml, "approvals:") {
		yaml = strings.TrimRight(yaml, "\n") + "\napprovals:\n  enabled: false\n"
	}
	p := filepath.Join(t.TempDir(), "idemgate.yaml")
	require.NoError(t, os.WriteFile(p, []byte(yaml), 0o600))
	return p
}

func TestExampleConfigIsValid(t *testing.T) {
	c, err := loadConfig(flagsWith(t, "--config", "../../configs/idemgate.example.yaml"))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	require.Equal(t, 2160*time.Hour, c.Journal.RetentionByType["payment.charge"])
	require.Equal(t, "yookassa", c.Routes["payment.charge"])
	require.NotNil(t, c.Adapters.YooKassa)
	require.Equal(t, 4, c.Worker.Retry.MaxAttempts)
	d := worker.DefaultRules()
	require.ElementsMatch(t, d.Retry, c.Worker.Rules.Retry, "the example lists the default rules")
	require.ElementsMatch(t, d.ReconcileBeforeRetry, c.Worker.Rules.ReconcileBeforeRetry, "the example lists the default rules")
	require.ElementsMatch(t, d.NeverRetry, c.Worker.Rules.NeverRetry, "the example lists the default rules")
}

func TestUnknownKeyIsAnError(t *testing.T) {
	p := writeConfig(t, "nats:\n  urll: nats://x\n")
	_, err := loadConfig(flagsWith(t, "--config", p))
	require.ErrorContains(t, err, "urll")
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--config", p}, &bytes.Buffer{}, &stderr)
	require.Equal(t, exitConfig, code)
	require.Contains(t, stderr.String(), "urll")
}

func TestPrecedenceFlagOverEnvOverFile(t *testing.T) {
	p := writeConfig(t, "env: staging\nworker:\n  lease_ttl: 40s\nnats:\n  ack_wait: 2m\n")
	t.Setenv("IDEMGATE_WORKER_LEASE_TTL", "45s")
	t.Setenv("IDEMGATE_ENV", "fromenv")
	t.Setenv("DATABASE_URL", "postgres://example/db")
	c, err := loadConfig(flagsWith(t, "--config", p, "--env", "fromflag"))
	require.NoError(t, err)
	require.Equal(t, "fromflag", c.Env)
	require.Equal(t, 45*time.Second, c.Worker.LeaseTTL)
	require.Equal(t, 2*time.Minute, c.NATS.AckWait)
	require.Equal(t, "postgres://example/db", c.Journal.URL)
}

func TestUnsafeHorizonsRefused(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"call outlives lease":       {"worker:\n  lease_ttl: 5s\n  call_timeout: 5s\n  heartbeat_interval: 1s\n", "call_timeout"},
		"lease outlives ackwait":    {"worker:\n  lease_ttl: 50s\nnats:\n  ack_wait: 55s\n", "ack_wait"},
		"retention short":           {"journal:\n  retention: 1m\n", "journal.retention"},
		"in-lease outlives ackwait": {"worker:\n  retry:\n    in_lease: 55s\n", "retry.in_lease"},
		"budget outlives commands":  {"worker:\n  retry:\n    max_elapsed: 200h\n", "retry.max_elapsed"},
		"type retention short":      {"journal:\n  retention_by_type:\n    payment.charge: 1h\n", "retention_by_type.payment.charge"},
		"replicas on sqlite":        {"replicas: 2\n", "PostgreSQL"},
		"bad env":                   {"env: 'Prod Env'\n", "env"},
		"unknown route":             {"routes:\n  payment.teleport: x\n", "payment.teleport"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, tc.yaml)))
			require.NoError(t, err)
			err = c.validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestEachRetentionRuleRefusesAlone: each rule retention must meet is
// broken on its own, the others met, and is named by its own message, so
// that no rule can be dropped unnoticed. (Retention above max_elapsed
// follows from the other two: max_elapsed must already be below
// commands_max_age, which retention must reach.)
func TestEachRetentionRuleRefusesAlone(t *testing.T) {
	rules := map[string]string{
		"window":  "is shorter than nats.duplicate_window",
		"horizon": "is shorter than the redelivery horizon",
		"budget":  "must exceed worker.retry.max_elapsed",
		"age":     "is shorter than nats.commands_max_age",
		"pg":      "several replicas need a shared PostgreSQL",
		"nats":    "several replicas need a shared NATS",
	}
	cases := map[string]struct{ yaml, broken string }{
		"under the duplicate window":   {"journal:\n  retention: 2h\nnats:\n  commands_max_age: 1h\n  duplicate_window: 3h\n", "window"},
		"under the redelivery horizon": {"journal:\n  retention: 15m\nnats:\n  commands_max_age: 10m\n", "horizon"},
		"under commands_max_age":       {"journal:\n  retention: 100h\n", "age"},
		"replicas on one NATS":         {"replicas: 2\njournal:\n  url: postgres://db.example/idemgate\n", "nats"},
		"replicas on SQLite":           {"replicas: 2\nnats:\n  url: nats://nats.example:4222\n", "pg"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, "env: test\n"+tc.yaml)))
			require.NoError(t, err)
			err = c.validate()
			require.Error(t, err)
			for rule, msg := range rules {
				if rule == tc.broken {
					require.Contains(t, err.Error(), msg)
				} else {
					require.NotContains(t, err.Error(), msg, "only the %s rule is broken", tc.broken)
				}
			}
		})
	}
}

// refusingAddr is a loopback address where nothing listens, nor can until
// the test ends: a connection there is refused.
func refusingAddr(t *testing.T) string {
	t.Helper()
	addr, release, err := childproc.RefusingAddr()
	require.NoError(t, err)
	t.Cleanup(release)
	return addr
}

// reservedAddr is a loopback address for a server that binds it later,
// where the address must be known beforehand (a configuration file that
// tools read too, a flag under test): childproc.FreePort's port, which no
// other FreePort and no bind to port 0 can take meanwhile. Where the
// server can take a port itself, give it port 0 and read back the one it
// took instead.
func reservedAddr(t *testing.T) string {
	t.Helper()
	p, err := childproc.FreePort()
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// TestDaemonEndToEnd runs the daemon as `idemgate run` does, on the embedded
// defaults (embedded NATS, SQLite journal) and on PostgreSQL, against the
// YooKassa sandbox, and counts charges there.
func TestDaemonEndToEnd(t *testing.T) {
	for _, journalKind := range []string{"sqlite", "postgres"} {
		t.Run(journalKind, func(t *testing.T) {
			sb := sbyookassa.New(sbyookassa.Options{})
			url, err := sb.Start("127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { _ = sb.Close() })
			shop, secret := sb.Credentials()

			c := testDefaults()
			c.Env = "test"
			c.DataDir = t.TempDir()
			c.Admin.Addr = "127.0.0.1:0"
			c.NATS.EmbeddedAddr = "127.0.0.1:0"
			c.NATS.FetchWait = 50 * time.Millisecond
			if journalKind == "postgres" {
				c.Journal.URL = pgtest.Schema(t)
			}
			c.Routes = map[string]string{"payment.charge": "yookassa"}
			c.Adapters.YooKassa = &yookassa.Config{BaseURL: url, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}}
			require.NoError(t, c.validate())

			ctx, cancel := context.WithCancel(context.Background())
			logs := &lockedWriter{w: &bytes.Buffer{}}
			started := make(chan *daemon, 1)
			done := make(chan error, 1)
			go func() {
				done <- runDaemon(ctx, c, newLogger(c, logs), func(d *daemon) { started <- d })
			}()
			var d *daemon
			select {
			case d = <-started:
			case err := <-done:
				t.Fatalf("daemon ended: %v", err)
			case <-time.After(60 * time.Second):
				t.Fatal("daemon did not start")
			}

			nc, err := nats.Connect("nats://" + d.natsAddr)
			require.NoError(t, err)
			defer nc.Close()
			cl, err := producer.New(nc, "")
			require.NoError(t, err)
			cmd := operation.Command{EventID: "evt-e2e", Operation: "payment.charge", ApprovalID: "appr-1",
				Payload: json.RawMessage(`{"account_id":"merchant-account-17","order_id":"order-48291","amount_minor":125000,"currency":"rub"}`)}
			key := "test:payment.charge:evt-e2e:v1"
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			defer wcancel()
			first, err := cl.PublishAndWait(wctx, cmd, key, nil)
			require.NoError(t, err)
			require.Equal(t, operation.ResultSucceeded, first.Status, "%+v", first)
			require.NotEmpty(t, first.TargetObjectID)
			// The agent retries: the same event id (a JetStream duplicate) and a
			// redelivery under a new event id for the same intent.
			again, err := cl.PublishAndWait(wctx, cmd, key, nil)
			require.NoError(t, err)
			require.Equal(t, first.TargetObjectID, again.TargetObjectID)
			cmd2 := cmd
			cmd2.EventID, cmd2.IntentID = "evt-e2e-retry", "evt-e2e"
			third, err := cl.PublishAndWait(wctx, cmd2, key, nil)
			require.NoError(t, err)
			require.Equal(t, first.TargetObjectID, third.TargetObjectID)
			require.True(t, third.Replayed)
			require.Equal(t, 1, sb.TotalEffects(), "one charge in the target")

			// Admin endpoints.
			for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ok", "/metrics": "idemgate_operations_executed_total 1"} {
				body := httpGet(t, "http://"+d.adminAddr+path)
				require.Contains(t, body, want, path)
			}
			// One call to the target: one connection opened toward it.
			require.Contains(t, httpGet(t, "http://"+d.adminAddr+"/metrics"), `idemgate_adapter_connections_opened_total{target="yookassa"} 1`)
			cancel()
			require.NoError(t, <-done)
			require.NotContains(t, logs.String(), "merchant-account-17", "payloads are never logged")
			require.NotContains(t, logs.String(), secret, "credentials are never logged")
		})
	}
}

func TestTraceAndResolveCommands(t *testing.T) {
	dsn := pgtest.Schema(t)
	args := func(a ...string) []string { return append(a, "--journal-url", dsn, "--env", "test") }
	var out, errb bytes.Buffer
	require.Equal(t, exitUnknown, run(context.Background(), args("trace", "test:payment.charge:nope:v1"), &out, &errb), errb.String())
	require.Equal(t, exitUnknown, run(context.Background(), args("resolve", "test:payment.charge:nope:v1", "--as", "failed_final", "--evidence", "x", "--operator", "alice"), &out, &errb))
	out.Reset()
	require.Equal(t, exitOK, run(context.Background(), args("trace", "--unresolved"), &out, &errb), errb.String())
	require.Contains(t, out.String(), "KEY")
	out.Reset()
	require.Equal(t, exitOK, run(context.Background(), args("migrate", "status", "--check"), &out, &errb), errb.String())
	require.Contains(t, out.String(), "0001 applied")
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := httpClient.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return strconv.Itoa(resp.StatusCode) + " " + b.String()
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// loggedAttr waits until logs holds the record a server logs once it
// listens (its message contains msg) and returns that record's key
// attribute: how a test reads back the port a daemon or a tool given port 0
// took ("admin endpoints" addr, "ingest listening" addr, "mcp serving"
// addr, "nats: embedded JetStream server" url). Both log formats are read.
func loggedAttr(t *testing.T, logs fmt.Stringer, msg, key string) string {
	t.Helper()
	text := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(key) + `=("(?:[^"\\]|\\.)*"|\S+)`)
	for deadline := time.Now().Add(60 * time.Second); ; {
		for _, line := range strings.Split(logs.String(), "\n") {
			if !strings.Contains(line, msg) {
				continue
			}
			if strings.HasPrefix(line, "{") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) == nil {
					if v, ok := rec[key].(string); ok {
						return v
					}
				}
			} else if m := text.FindStringSubmatch(line); m != nil {
				if v, err := strconv.Unquote(m[1]); err == nil {
					return v
				}
				return m[1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q record with %s in 60s; logs:\n%s", msg, key, logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the log, with a deadline
	}
}

// lockedWriter serialises writes from the daemon's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
