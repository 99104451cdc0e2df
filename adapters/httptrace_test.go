package adapters_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/internal/telemetry"
	"github.com/idemgate/idemgate/internal/telemetry/otelsetup"
)

// TestTracedTransportDoesNotResendKeyedPOST: with tracing on, a call within
// a trace goes through otelhttp (a client span, child of the caller's, and
// the trace context sent to the target) and the transport still never
// re-sends a NewRequest POST on a connection that closed unanswered.
// Not parallel: it installs the global tracer provider.
func TestTracedTransportDoesNotResendKeyedPOST(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p := otelsetup.Install(sdktrace.WithSyncer(otelsetup.Redacting(exp)))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	require.True(t, telemetry.Enabled())

	srv, seen := closeSecond(t)
	var traceparent []string
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent = append(traceparent, r.Header.Get("traceparent"))
		inner.ServeHTTP(w, r)
	})
	c := adapters.NewHTTPClient(5 * time.Second)
	ctx, parent := p.TracerProvider().Tracer("test").Start(context.Background(), "attempt")
	var last error
	for range 2 {
		req, err := adapters.NewRequest(ctx, http.MethodPost, srv.URL+"/rest/1/webhook-code-canary/crm.deal.add?filter=key-canary", []byte(`{}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k")
		var resp *adapters.HTTPResponse
		resp, last = adapters.Send(c, req, 0)
		if last == nil {
			require.Equal(t, http.StatusCreated, resp.StatusCode)
		}
	}
	parent.End()
	require.Equal(t, int32(2), seen.Load(), "no silent re-send through otelhttp")
	ae := adapters.AsError(last)
	require.Equal(t, adapters.ReconcileBeforeRetry, ae.Class, "%v", last)

	spans := exp.GetSpans()
	var client []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindClient {
			client = append(client, s)
		}
	}
	require.Len(t, client, 2, "one client span per call")
	for i, s := range client {
		require.Equal(t, parent.SpanContext().SpanID(), s.Parent.SpanID(), "the call's span is the attempt's child")
		require.Equal(t, "HTTP POST", s.Name)
		require.Contains(t, traceparent[i], parent.SpanContext().TraceID().String(), "the target receives the trace context")
		for _, kv := range s.Attributes {
			require.NotContains(t, kv.Value.String(), "webhook-code-canary", "%s: URL paths are not exported", kv.Key)
			require.NotContains(t, kv.Value.String(), "key-canary", "%s: URL queries are not exported", kv.Key)
		}
		require.NotContains(t, s.Status.Description, "webhook-code-canary")
	}
}
