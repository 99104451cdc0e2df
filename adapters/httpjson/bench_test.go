package httpjson_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/httpjson"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/operation"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
)

// onecDeclared declares the 1C HTTP service (POST /hs/integration/invoices
// with Idempotency-Key, GET by key) the way a user would declare any
// target: what the built-in onec adapter does in Go code.
func onecDeclared(base string) httpjson.Config {
	typ, _ := operation.DefaultRegistry().Lookup("invoice.create")
	return httpjson.Config{
		HTTPConfig:   adapters.HTTPConfig{Name: "onec-declared", Timeout: 10 * time.Second, Getenv: func(string) string { return sbonec.DefaultPassword }},
		TargetSystem: "1c", BaseURL: base,
		Auth: httpjson.AuthConfig{Scheme: "basic", User: sbonec.DefaultUser, SecretEnv: "ONEC_PASSWORD"},
		Key:  httpjson.KeyConfig{In: httpjson.KeyInHeader, Name: "Idempotency-Key", MaxLen: 100},
		Execute: httpjson.ExecuteConfig{
			URL:      "/hs/integration/invoices",
			Body:     `{"order_id": "${payload.order_id}", "customer_id": "${payload.customer_id}", "amount_minor": "${payload.amount_minor}", "currency": "${payload.currency}", "due_date": "${payload.due_date}", "description": "${marker}"}`,
			ObjectID: "ref", StatusDefault: "created", KeyEcho: "key",
		},
		Errors:       []httpjson.ErrorRule{{Status: []int{409}, BodyPath: "error", Equals: "idempotency_key_reused", Class: "never_retry", Code: adapters.CodeKeyPayloadMismatch}},
		Lookup:       []httpjson.LookupRequest{{Mode: httpjson.LookupGet, URL: "/hs/integration/invoices/${key}", KeyPath: "key", MarkerPath: "description", NotFoundPath: "error", NotFoundEquals: "not_found"}},
		Capabilities: httpjson.CapabilitiesConfig{NativeKey: true},
		Types:        []operation.Type{typ},
	}
}

var benchSeq atomic.Int64

func invoiceOp(b testing.TB, intent string) operation.Operation {
	d := operation.Decoder{Env: "bench"}
	op, err := d.Decode([]byte(`{"event_id":"ev-` + intent + `","operation":"invoice.create","intent_id":"` + intent + `","payload":{"order_id":"` + intent + `","customer_id":"cust-42","amount_minor":125000,"currency":"RUB","due_date":"2030-01-31"}}`))
	require.NoError(b, err)
	return op
}

// BenchmarkExecute measures one Execute (a new invoice: one POST, one
// effect) through the built-in 1C adapter and through the declared one,
// against the same 1C emulator on loopback. The declarative adapter's
// overhead is the difference per call:
//
//	go test -run '^$' -bench 'Execute' -benchmem -count 6 ./adapters/httpjson/
func BenchmarkExecute(b *testing.B) {
	srv := sbonec.New(sbonec.Options{})
	_, err := srv.Start("")
	require.NoError(b, err)
	b.Cleanup(func() { _ = srv.Close() })
	builtin, err := onec.New(onec.Config{
		HTTPConfig: adapters.HTTPConfig{Timeout: 10 * time.Second, Getenv: func(string) string { return sbonec.DefaultPassword }},
		BaseURL:    srv.BaseURL(), User: sbonec.DefaultUser,
	})
	require.NoError(b, err)
	declared, err := httpjson.New(onecDeclared(srv.BaseURL()))
	require.NoError(b, err)
	for _, c := range []struct {
		name string
		a    adapters.Adapter
	}{{"builtin_onec", builtin}, {"declared_httpjson", declared}} {
		b.Run(c.name, func(b *testing.B) {
			srv.Reset() // each run meets an empty target
			ops := make([]operation.Operation, b.N)
			for i := range ops {
				ops[i] = invoiceOp(b, fmt.Sprintf("%s-%d", c.name, benchSeq.Add(1)))
			}
			before := srv.TotalEffects()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				out, err := c.a.Execute(ctx, ops[i])
				if err != nil || out.ObjectID == "" {
					b.Fatalf("execute: %v", err)
				}
			}
			b.StopTimer()
			require.Equal(b, before+b.N, srv.TotalEffects(), "one effect per Execute")
		})
	}
}

// BenchmarkExecuteInterleaved runs the two adapters in alternation, one
// call each per iteration against the same emulator, so that the load of a
// shared machine falls on both alike, and reports each one's mean time
// per call and the declared adapter's overhead in percent:
//
//	go test -run '^$' -bench 'ExecuteInterleaved' -benchtime 3000x -count 6 ./adapters/httpjson/
func BenchmarkExecuteInterleaved(b *testing.B) {
	srv := sbonec.New(sbonec.Options{})
	_, err := srv.Start("")
	require.NoError(b, err)
	b.Cleanup(func() { _ = srv.Close() })
	builtin, err := onec.New(onec.Config{
		HTTPConfig: adapters.HTTPConfig{Timeout: 10 * time.Second, Getenv: func(string) string { return sbonec.DefaultPassword }},
		BaseURL:    srv.BaseURL(), User: sbonec.DefaultUser,
	})
	require.NoError(b, err)
	declared, err := httpjson.New(onecDeclared(srv.BaseURL()))
	require.NoError(b, err)
	srv.Reset()
	adapters := [2]adapters.Adapter{builtin, declared}
	ops := make([][2]operation.Operation, b.N)
	for i := range ops {
		for k := range 2 {
			ops[i][k] = invoiceOp(b, fmt.Sprintf("inter-%d", benchSeq.Add(1)))
		}
	}
	var spent, cpu [2]time.Duration
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		for j := range 2 {
			k := (i + j) % 2 // alternate which goes first
			c0 := cpuTime()
			t0 := time.Now()
			if _, err := adapters[k].Execute(ctx, ops[i][k]); err != nil {
				b.Fatalf("execute: %v", err)
			}
			spent[k] += time.Since(t0)
			cpu[k] += cpuTime() - c0
		}
	}
	b.StopTimer()
	require.Equal(b, 2*b.N, srv.TotalEffects(), "one effect per Execute")
	bn, dn := float64(spent[0])/float64(b.N), float64(spent[1])/float64(b.N)
	b.ReportMetric(bn, "builtin-ns/call")
	b.ReportMetric(dn, "declared-ns/call")
	b.ReportMetric(100*(dn-bn)/bn, "overhead-%")
	// CPU time of the process (adapter, emulator and loopback stack) per
	// call: less sensitive than wall time to other work on the machine.
	bc, dc := float64(cpu[0])/float64(b.N), float64(cpu[1])/float64(b.N)
	b.ReportMetric(bc, "builtin-cpu-ns/call")
	b.ReportMetric(dc, "declared-cpu-ns/call")
	b.ReportMetric(100*(dc-bc)/bc, "cpu-overhead-%")
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDeclaredOneCMatchesBuiltin: the declaration used by the benchmark
// is a working 1C adapter: one effect, a replay found by the key, a lookup
// by key alone — so the benchmark compares equals.
func TestDeclaredOneCMatchesBuiltin(t *testing.T) {
	t.Parallel()
	srv := sbonec.New(sbonec.Options{})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	a, err := httpjson.New(onecDeclared(srv.BaseURL()))
	require.NoError(t, err)
	op := invoiceOp(t, "decl-1c-1")
	out, err := a.Execute(t.Context(), op)
	require.NoError(t, err)
	again, err := a.Execute(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, out.ObjectID, again.ObjectID)
	require.Equal(t, 1, srv.Effects(op.Key.String()))
	keyOnly := op
	keyOnly.Fields = nil
	lr, err := a.Lookup(t.Context(), keyOnly)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
	other := invoiceOp(t, "decl-1c-1")
	other.Fields["amount_minor"] = int64(1)
	_, err = a.Execute(t.Context(), other)
	requireClass(t, err, adapters.NeverRetry, adapters.CodeKeyPayloadMismatch)
}
