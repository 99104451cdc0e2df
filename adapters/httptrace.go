package adapters

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/internal/telemetry"
)

// tracedTransport sends a request through otelhttp (a client span, the W3C
// trace context in the request headers) when tracing is on and the call is
// part of a trace (an attempt's span); otherwise straight to the base
// transport. otelhttp clones the request, GetBody included (nil for
// NewRequest's bodies), so the base transport still never re-sends a
// request by itself.
type tracedTransport struct {
	base   http.RoundTripper
	traced http.RoundTripper
}

func newTracedTransport(base http.RoundTripper) http.RoundTripper {
	return tracedTransport{base: base, traced: otelhttp.NewTransport(base,
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "HTTP " + r.Method }))}
}

func (t tracedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if telemetry.Enabled() && trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.traced.RoundTrip(r)
	}
	return t.base.RoundTrip(r)
}
