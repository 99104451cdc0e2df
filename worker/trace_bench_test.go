package worker_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/internal/telemetry/otelsetup"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/worker"
)

// BenchmarkDaemonTraced is BenchmarkDaemon with tracing on: every command
// gets its delivery, claim, attempt and result spans, recorded by the SDK
// and handed in batches to an exporter that discards them (the cost of
// tracing in the daemon, not of a collector's network). Compare with
// BenchmarkDaemon (tracing off) for the cost when on; compare
// BenchmarkDaemon with the same benchmark before the instrumentation for
// the cost when off.
func BenchmarkDaemonTraced(b *testing.B) {
	p := otelsetup.Install(sdktrace.WithBatcher(otelsetup.Redacting(tracetest.NewNoopExporter())))
	defer func() { _ = p.Shutdown(context.Background()) }()
	s := newStage(b, *benchCommands*b.N, true)
	target := &noop{}
	lat := newLatencies(s.total)
	m := worker.NewMetrics(nil)
	worker.ObserveDurations(m, lat.add)
	store := &countingStore{Store: postgres.New(s.pool, postgres.Config{})}
	w, err := worker.New(benchConfig(), s.ncfg, worker.Deps{
		Store: store, JS: s.js, NC: s.nc, Consumer: s.cons,
		Decoder:  &operation.Decoder{Env: benchEnv},
		Adapters: map[string]adapters.Adapter{"payment.charge": target},
		Metrics:  m,
	})
	if err != nil {
		b.Fatal(err)
	}
	measure(b, s, lat, func() {
		if err := w.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
	w.Stop()
	store.report(b)
	if got := int(target.calls.Load()); got != s.distinct {
		b.Fatalf("%d calls for %d distinct keys", got, s.distinct)
	}
}
