package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/telemetry/otelsetup"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
)

// traceHeader adds an agent's traceparent to every HTTP request.
type traceHeader string

func (h traceHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", string(h))
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPContinuesTheAgentsTrace: a tool call carrying W3C trace context,
// in its _meta (any transport) or in the headers of the Streamable HTTP
// request, submits a command whose publish span is the agent's span's
// child; a call without it starts a trace of its own.
func TestMCPContinuesTheAgentsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p := otelsetup.Install(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })

	b := setup(t, daemontest.Engines[0], gateway.Config{PollAfter: 200 * time.Millisecond}, nil)
	const agentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	parent := func(span string) string { return "00-" + agentTrace + "-" + span + "-01" }

	// publishOf finds the one publish span of the command for order.
	publishOf := func(order string) sdktrace.ReadOnlySpan {
		t.Helper()
		var found []sdktrace.ReadOnlySpan
		require.Eventually(t, func() bool {
			found = found[:0]
			for _, s := range exp.GetSpans().Snapshots() {
				if s.Name() == "publish idemgate.cmd.payment.charge" && s.SpanKind() == trace.SpanKindProducer {
					found = append(found, s)
				}
			}
			return len(found) > 0
		}, 10*time.Second, 20*time.Millisecond)
		require.Len(t, found, 1, "one publish for %s", order)
		return found[0]
	}

	// _meta on the in-memory transport.
	res, err := b.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "payment_charge",
		Arguments: chargeArgs("mcp-traced-1", "order-traced-1", 4200),
		Meta:      sdk.Meta{"traceparent": parent("00f067aa0ba902b7")}})
	require.NoError(t, err)
	require.Equal(t, gateway.StatusSucceeded, answerOf(t, res).Status)
	s := publishOf("order-traced-1")
	require.Equal(t, agentTrace, s.SpanContext().TraceID().String(), "the command joins the agent's trace")
	require.Equal(t, "00f067aa0ba902b7", s.Parent().SpanID().String())
	require.True(t, s.Parent().IsRemote())

	// The traceparent header of a Streamable HTTP request.
	exp.Reset()
	srv, err := gwmcp.NewServer(b.g, gwmcp.Options{Version: "test"})
	require.NoError(t, err)
	hs := httptest.NewServer(gwmcp.Handler(srv, gwmcp.HTTPOptions{}))
	t.Cleanup(hs.Close)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: traceHeader(parent("b7ad6b7169203331"))}, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	require.Equal(t, gateway.StatusSucceeded, call(t, cs, "payment_charge", chargeArgs("mcp-traced-2", "order-traced-2", 4300)).Status)
	s = publishOf("order-traced-2")
	require.Equal(t, agentTrace, s.SpanContext().TraceID().String())
	require.Equal(t, "b7ad6b7169203331", s.Parent().SpanID().String())

	// No trace context: a trace of the command's own.
	exp.Reset()
	require.Equal(t, gateway.StatusSucceeded, call(t, b.cs, "payment_charge", chargeArgs("mcp-traced-3", "order-traced-3", 4400)).Status)
	s = publishOf("order-traced-3")
	require.NotEqual(t, agentTrace, s.SpanContext().TraceID().String())
	require.False(t, s.Parent().IsValid())
	require.Equal(t, 3, b.d.YooKassa.TotalEffects())
}
