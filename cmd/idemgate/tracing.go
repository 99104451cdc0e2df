package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/internal/telemetry/otelsetup"
	"github.com/idemgate/idemgate/journal"
)

// startTracing turns OpenTelemetry tracing on when the standard OTEL_*
// environment asks for it (an OTLP endpoint, or OTEL_TRACES_EXPORTER=otlp);
// otherwise it does nothing. The returned stop flushes buffered spans.
// A malformed OTEL_* setting is a configuration error.
func startTracing(ctx context.Context, log *slog.Logger) (stop func(), err error) {
	p, err := otelsetup.Setup(ctx, readBuildInfo().Version)
	if err != nil {
		return func() {}, configError(err)
	}
	if p == nil {
		return func() {}, nil
	}
	log.Info("tracing on: spans are exported over OTLP (OTEL_* environment)")
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			log.Warn("flushing spans failed", "error", err.Error())
		}
	}, nil
}

// attemptTraces reads the trace ids of key's attempts (migration 0004),
// by lease token; none when the store keeps none or cannot read them.
func attemptTraces(ctx context.Context, st journal.Store, key string) map[int64]string {
	at, ok := st.(journal.AttemptTraces)
	if !ok {
		return map[int64]string{}
	}
	ids, err := at.AttemptTraceIDs(ctx, key)
	if err != nil || ids == nil {
		return map[int64]string{}
	}
	return ids
}
