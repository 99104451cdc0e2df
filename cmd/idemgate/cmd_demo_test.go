package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/cmd/idemgate/internal/demo"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
)

// demoRow is one line of the closing table.
type demoRow struct {
	scenario                                               string
	sent, intents, effects, replays, conflicts, reconciled int
	verdict                                                string
}

var demoRowRE = regexp.MustCompile(`^(.+?)\s{2,}(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+\s+(PASS|FAIL|SKIP)$`)

// parseDemoTable reads the closing table's rows from the demo's output.
func parseDemoTable(t *testing.T, out string) map[string]demoRow {
	t.Helper()
	_, table, ok := strings.Cut(out, "\nSCENARIO ")
	require.True(t, ok, "no closing table in:\n%s", out)
	rows := map[string]demoRow{}
	for _, line := range strings.Split(table, "\n")[1:] {
		if line == "" {
			break
		}
		m := demoRowRE.FindStringSubmatch(line)
		require.NotNil(t, m, "unparsable table line %q", line)
		n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
		rows[m[1]] = demoRow{scenario: m[1], sent: n(3), intents: n(4), effects: n(5), replays: n(6), conflicts: n(7), reconciled: n(8), verdict: m[9]}
	}
	return rows
}

// TestDemo runs `idemgate demo` as a person would, on the embedded defaults
// and on PostgreSQL, and checks the table: every guarantee held, effects
// counted in the sandboxes equal the distinct intents, and the counts each
// scenario exists to show.
func TestDemo(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			args := []string{"demo", "--timeout", "3m"}
			if kind == "postgres" {
				args = append(args, "--journal-url", pgtest.Schema(t))
			}
			var out, errOut bytes.Buffer
			code := run(context.Background(), args, &out, &errOut)
			require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
			text := out.String()
			require.Contains(t, text, "RESULT: PASS — all ")
			require.NotContains(t, text, "FAIL")

			rows := parseDemoTable(t, text)
			require.Len(t, rows, len(demo.IDs()))
			const checkout = "checkout: a declined charge cancels the invoice"
			const killed = "checkout: its coordinator stopped dead mid-process"
			for name, r := range rows {
				require.Equal(t, "PASS", r.verdict, name)
				require.Positive(t, r.intents, name)
				if name == checkout || name == killed {
					continue // a process's intent makes one effect per step (below)
				}
				require.Equal(t, r.intents, r.effects, "%s: effects counted in the sandbox must equal distinct intents", name)
			}
			require.Equal(t, demoRow{scenario: checkout, sent: 3, intents: 2, effects: 6, replays: 1, verdict: "PASS"}, rows[checkout],
				"3 steps for the checkout, the invoice, the declined payment and the invoice's cancellation for the declined one; its copy replayed")
			require.Equal(t, demoRow{scenario: killed, sent: 1, intents: 1, effects: 3, verdict: "PASS"}, rows[killed],
				"the coordinator stopped after the charge; the process taken over and resumed: one effect per step")
			require.Contains(t, text, "PASS  the coordinator stopped dead mid-process")
			require.Regexp(t, `PASS  the process was taken over and resumed, each step made once: process succeeded under lease token [2-9]`, text)
			require.Equal(t, demoRow{scenario: "payment: duplicates and retries", sent: 5, intents: 1, effects: 1, replays: 2, verdict: "PASS"},
				rows["payment: duplicates and retries"])
			require.Equal(t, 1, rows["payment: lost response reconciled"].reconciled)
			require.Equal(t, 1, rows["payment: same key, other payload"].conflicts)
			require.Equal(t, 1, rows["invoice (1C): 500 after posting, retry"].reconciled)
			require.Equal(t, 4, rows["CRM task (Bitrix24): duplicates, rate limit"].sent)
			race := rows["two replicas racing"]
			require.Equal(t, 24, race.sent)
			require.Equal(t, 8, race.effects)
			require.Positive(t, race.replays, "copies not executed are answered from the journal")
			require.Equal(t, demoRow{scenario: "an agent through MCP", sent: 4, intents: 2, effects: 2, replays: 1, conflicts: 1, reconciled: 1, verdict: "PASS"},
				rows["an agent through MCP"])
			require.Equal(t, demoRow{scenario: "a charge waits for a person", sent: 3, intents: 1, effects: 1, replays: 1, verdict: "PASS"},
				rows["a charge waits for a person"], "two answers await_approval, no charge before the decision, one after")
			require.Contains(t, text, "PASS  nothing charged while the intent waits: 0 payment(s)")
			require.Contains(t, text, "demo-replica-2")
			require.Contains(t, text, "PASS  Retry-After honoured")
			if kind == "sqlite" {
				require.Contains(t, text, "replicas on several machines need PostgreSQL")
			}

			// The temporary data folder is gone after a passing run.
			m := regexp.MustCompile(`(?m)^  data\s+(\S+) \(temporary`).FindStringSubmatch(text)
			require.NotNil(t, m, "data folder line")
			require.NoDirExists(t, m[1])
			require.NotContains(t, errOut.String(), "test_sandbox_secret_key", "no credential on stderr")
		})
	}
}

// TestDemoDataDirAndLog: with --data-dir the journal, the NATS store and the
// daemon log stay there, and the log holds no payload or credential.
func TestDemoDataDirAndLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"demo", "--data-dir", dir, "--scenario", "payment-lost-response,payment-conflict"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	rows := parseDemoTable(t, out.String())
	require.Len(t, rows, 2)
	require.Contains(t, out.String(), "Data kept in "+dir)
	require.FileExists(t, filepath.Join(dir, "journal.db"))
	require.FileExists(t, filepath.Join(dir, "idemgate.log"))
	require.DirExists(t, filepath.Join(dir, "nats"))
	log, err := os.ReadFile(filepath.Join(dir, "idemgate.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "reconciled: found by key")
	require.NotContains(t, string(log), "merchant-account-17", "payloads are never logged")
	require.NotContains(t, string(log), "test_sandbox_secret_key", "credentials are never logged")
}

func TestDemoFlags(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"unknown scenario": {args: []string{"demo", "--scenario", "teleport"}, code: exitUsage, want: "payment-duplicates"},
		"zero timeout":     {args: []string{"demo", "--timeout", "0s"}, code: exitUsage, want: "--timeout"},
		"bad timeout":      {args: []string{"demo", "--timeout", "soon"}, code: exitUsage, want: "timeout"},
		"timeout reached":  {args: []string{"demo", "--timeout", "1ms"}, code: exitFailure, want: "did not finish within --timeout 1ms"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			require.Equal(t, tc.code, run(context.Background(), tc.args, &out, &errOut))
			require.Contains(t, errOut.String(), tc.want)
		})
	}
}

// TestDemoExit: a failed guarantee, or a run cut short, exits 1 with the
// failed guarantees named.
func TestDemoExit(t *testing.T) {
	t.Parallel()
	pass := demo.Row{Scenario: "payment: duplicates and retries", Checks: []demo.Check{{Guarantee: "one effect per intent", Pass: true}}}
	fail := demo.Row{Scenario: "payment: lost response reconciled", Checks: []demo.Check{
		{Guarantee: "one effect per intent", Pass: true},
		{Guarantee: "unknown outcome looked up by key, never retried blindly", Pass: false, Detail: "2 calls"},
	}}
	cases := map[string]struct {
		rep    demo.Report
		runErr error
		code   int
		want   string
	}{
		"all held":          {rep: demo.Report{Rows: []demo.Row{pass}}, code: exitOK},
		"one failed":        {rep: demo.Report{Rows: []demo.Row{pass, fail}}, code: exitFailure, want: "1 guarantee(s) failed: payment: lost response reconciled: unknown outcome looked up by key"},
		"nothing ran":       {rep: demo.Report{}, code: exitFailure, want: "no scenario ran"},
		"cut short":         {rep: demo.Report{Rows: []demo.Row{pass}}, runErr: context.DeadlineExceeded, code: exitFailure, want: "deadline"},
		"skipped plus pass": {rep: demo.Report{Rows: []demo.Row{pass, {Scenario: "x", Skipped: "no route"}}}, code: exitOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := demoExit(tc.rep, tc.runErr)
			if tc.code == exitOK {
				require.NoError(t, err)
				return
			}
			var ee *exitError
			require.True(t, errors.As(err, &ee))
			require.Equal(t, tc.code, ee.code)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// BenchmarkDemoColdStart measures a cold start of the demo's system — the
// sandboxes, embedded NATS, the SQLite journal and the daemon — up to the
// first result of a command.
func BenchmarkDemoColdStart(b *testing.B) {
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sys, err := startDemo(ctx, demoSetup{dataDir: b.TempDir(), logTo: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		r, err := demo.FirstResult(ctx, sys.runtime())
		if err != nil || r.Status != operation.ResultSucceeded {
			b.Fatalf("first result %+v: %v", r, err)
		}
		b.StopTimer()
		if err := sys.close(); err != nil {
			b.Fatal(err)
		}
		cancel()
		b.StartTimer()
	}
}

// BenchmarkDemoThroughput is end-to-end operations per second — publish,
// JetStream, claim, a YooKassa sandbox call, complete, publish the result —
// on the embedded defaults (SQLite, embedded NATS) and on PostgreSQL, with
// the demo's daemon settings except a full fetch batch. The baseline,
// "target-only", is the YooKassa adapter calling the same sandbox directly
// from as many goroutines as the daemon's in-flight limit allows, without
// NATS or a journal: the ratio is what the guarantees cost.
func BenchmarkDemoThroughput(b *testing.B) {
	b.Run("target-only", benchTargetOnly)
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			set := demoSetup{dataDir: b.TempDir(), logTo: io.Discard, tune: func(c *Config) { c.NATS.FetchBatch = 100 }}
			if kind == "postgres" {
				set.journalURL = pgtest.Schema(b)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			sys, err := startDemo(ctx, set)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := sys.close(); err != nil {
					b.Error(err)
				}
			}()
			// Warm up: connections, prepared statements, the consumer.
			if _, err := demo.Load(ctx, sys.runtime(), 200, 16); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			res, err := demo.Load(ctx, sys.runtime(), b.N, 16)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if res.Succeeded != b.N || res.Effects != b.N {
				b.Fatalf("%d operations: %d succeeded, %d effects", b.N, res.Succeeded, res.Effects)
			}
			b.ReportMetric(res.PerSecond(), "ops/s")
		})
	}
}

func benchTargetOnly(b *testing.B) {
	sb, err := demo.StartSandboxes(sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	shop, secret := sb.YooKassa.Credentials()
	a, err := yookassa.New(yookassa.Config{BaseURL: sb.YooKassa.URL(), ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}})
	if err != nil {
		b.Fatal(err)
	}
	dec := &operation.Decoder{Env: "bench"}
	ops := make([]operation.Operation, b.N)
	for i := range ops {
		ops[i], err = dec.DecodeCommand(operation.Command{
			EventID: fmt.Sprintf("evt-%d", i), Operation: "payment.charge", ApprovalID: "appr-1",
			Payload: json.RawMessage(fmt.Sprintf(`{"account_id":"merchant-account-17","order_id":"order-%d","amount_minor":%d,"currency":"rub"}`, i, 100+i)),
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	next := make(chan operation.Operation)
	var wg sync.WaitGroup
	var failed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := range next {
				if _, err := a.Execute(context.Background(), op); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for _, op := range ops {
		next <- op
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed.Load() > 0 || sb.YooKassa.TotalEffects() != b.N {
		b.Fatalf("%d failed calls, %d effects for %d operations", failed.Load(), sb.YooKassa.TotalEffects(), b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}
