package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/internal/telemetry"
)

func spanContext(t *testing.T) trace.SpanContext {
	t.Helper()
	tid, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}

// TestHeaderCarrierWritesLowercase: the carrier writes "traceparent" as
// other NATS clients read it (nats.Header.Get is case-sensitive), reads any
// spelling, and replaces another spelling instead of adding a second.
func TestHeaderCarrierWritesLowercase(t *testing.T) {
	sc := spanContext(t)
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	h := nats.Header{}
	h.Set("Traceparent", "00-stale-stale-00") // as propagation.HeaderCarrier would write it
	propagation.TraceContext{}.Inject(ctx, telemetry.Header(h))
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", h.Get("traceparent"))
	require.Empty(t, h.Values("Traceparent"), "the other spelling is replaced")
	require.Len(t, h, 1)

	// A canonicalised header from another client is still read.
	other := nats.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), telemetry.Header(other)))
	require.Equal(t, sc.TraceID(), got.TraceID())
	require.Equal(t, sc.SpanID(), got.SpanID())
	require.True(t, got.IsRemote())
}

// TestInjectOnlyWithASpan: no span, no header (and no allocated map).
func TestInjectOnlyWithASpan(t *testing.T) {
	m := nats.NewMsg("x")
	m.Header = nil
	telemetry.Inject(context.Background(), m)
	require.Nil(t, m.Header)
}

// TestLogHandlerAddsTraceIDs: records logged with a span's context carry
// trace_id and span_id; others do not.
func TestLogHandlerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx := trace.ContextWithSpanContext(context.Background(), spanContext(t))
	log.InfoContext(ctx, "with span")
	require.Contains(t, buf.String(), `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"`)
	buf.Reset()
	log.InfoContext(context.Background(), "without")
	require.NotContains(t, buf.String(), "trace_id")
	require.Equal(t, []any{"trace_id", "4bf92f3577b34da6a3ce929d0e0e4736", "span_id", "00f067aa0ba902b7"}, telemetry.LogAttrs(ctx))
	require.Nil(t, telemetry.LogAttrs(context.Background()))
}
