package ingest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/internal/telemetry/otelsetup"
)

// TestWebhookCommandCarriesTraceContext: with tracing on, a webhook that
// carries a traceparent becomes a command whose NATS headers carry the
// trace on (lowercase traceparent), under a PRODUCER span that is the
// sender's child and records no event id or payload. Not parallel: it
// installs the global tracer provider.
func TestWebhookCommandCarriesTraceContext(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p := otelsetup.Install(sdktrace.WithSyncer(otelsetup.Redacting(exp)))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })

	b := setup(t, setupOpts{})
	body := stripeEvent("evt_TraceCanary42", "payment_intent.succeeded", "cust-canary-77")
	hdr := stripeHeader(stripeNew, fixedNow, body)
	const sender = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	hdr.Set("traceparent", sender)
	rec := b.post(t, "stripe", body, hdr, "")
	require.Equal(t, 200, rec.Code, rec.Body.String())

	m := b.last(t, "idemgate.cmd.crm.task.create")
	tp := m.Header.Get("traceparent")
	require.Contains(t, tp, "0af7651916cd43dd8448eb211c80319c", "the command carries the sender's trace")
	require.NotContains(t, tp, "b7ad6b7169203331", "its parent is the ingest span, not the sender's")

	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	s := spans[0]
	require.Equal(t, "publish idemgate.cmd.crm.task.create", s.Name)
	require.Equal(t, trace.SpanKindProducer, s.SpanKind)
	require.Equal(t, "b7ad6b7169203331", s.Parent.SpanID().String())
	require.Contains(t, tp, s.SpanContext.SpanID().String())
	for _, kv := range s.Attributes {
		require.NotContains(t, kv.Value.String(), "TraceCanary42", kv.Key)
		require.NotContains(t, kv.Value.String(), "cust-canary-77", kv.Key)
	}
}
