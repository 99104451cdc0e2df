// Package otelsetup turns tracing on from the standard OpenTelemetry
// environment: the tracer provider, an OTLP exporter over HTTP or gRPC,
// the resource, the sampler and the propagators. Tracing is off unless the
// environment asks for it.
//
// Every exported span passes a redaction step first (an HTTP client span's
// URL keeps only its scheme and host: paths carry Bitrix24 webhook codes and
// target object ids, queries carry lookup keys; error descriptions lose
// their URLs and pass through the log redaction rules).
//
// It imports the OpenTelemetry SDK and its OTLP exporters, internal/telemetry
// and redact; only cmd/idemgate imports it (deps_test.go).
package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemgate/idemgate/internal/telemetry"
)

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES name another.
const DefaultServiceName = "idemgate"

// Settings is what the environment asks for.
type Settings struct {
	// Enabled: traces are recorded and exported.
	Enabled bool
	// Protocol is the OTLP transport: "http/protobuf" or "grpc".
	Protocol string
	// Propagators are the OTEL_PROPAGATORS names in effect.
	Propagators []string
}

// FromEnv reads the tracing settings from the OpenTelemetry environment
// (lookup is os.LookupEnv in production):
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off;
//   - OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint
//     (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT):
//     on; neither: off (the default);
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
//     http/protobuf (default) or grpc;
//   - OTEL_PROPAGATORS: tracecontext and baggage (default both), or none.
//
// The exporter itself reads the endpoint, headers, timeout, compression and
// certificates; the SDK reads OTEL_TRACES_SAMPLER(_ARG) and the OTEL_BSP_*
// batch settings; the resource reads OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. Values it cannot honour are errors, never
// silently ignored.
func FromEnv(lookup func(string) (string, bool)) (Settings, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	var s Settings
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return s, nil
	}
	switch exp := strings.ToLower(get("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return s, nil
	case "otlp":
		s.Enabled = true
	case "":
		s.Enabled = get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return s, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: idemgate exports traces over OTLP only (otlp or none)", exp)
	}
	s.Protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if s.Protocol == "" {
		s.Protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch s.Protocol {
	case "":
		s.Protocol = "http/protobuf"
	case "http/protobuf", "grpc":
	default:
		return s, fmt.Errorf("OTLP protocol %q: use http/protobuf or grpc", s.Protocol)
	}
	props := get("OTEL_PROPAGATORS")
	if props == "" {
		props = "tracecontext,baggage"
	}
	for p := range strings.SplitSeq(props, ",") {
		switch p = strings.TrimSpace(p); p {
		case "tracecontext", "baggage", "none":
			s.Propagators = append(s.Propagators, p)
		case "":
		default:
			return s, fmt.Errorf("OTEL_PROPAGATORS: %q is not supported (tracecontext, baggage or none)", p)
		}
	}
	return s, nil
}

// Provider is the installed tracer provider; Shutdown flushes it and
// turns tracing off again.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Shutdown exports what is buffered and turns tracing off. Safe on nil.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.tp == nil {
		return nil
	}
	telemetry.SetEnabled(false)
	otel.SetTracerProvider(noop.NewTracerProvider())
	return p.tp.Shutdown(ctx)
}

// Setup installs tracing as the environment asks: nil (off) when it does
// not ask for it.
func Setup(ctx context.Context, version string) (*Provider, error) {
	s, err := FromEnv(os.LookupEnv)
	if err != nil || !s.Enabled {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch s.Protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL resource: %w", err)
	}
	otel.SetTextMapPropagator(propagators(s.Propagators))
	return Install(sdktrace.WithBatcher(Redacting(exp)), sdktrace.WithResource(res)), nil
}

func propagators(names []string) propagation.TextMapPropagator {
	var ps []propagation.TextMapPropagator
	for _, n := range names {
		switch n {
		case "tracecontext":
			ps = append(ps, propagation.TraceContext{})
		case "baggage":
			ps = append(ps, propagation.Baggage{})
		}
	}
	return propagation.NewCompositeTextMapPropagator(ps...)
}

// Install makes a tracer provider with opts the global one and turns the
// daemon's instrumentation on. Tests install an in-memory exporter with
// sdktrace.WithSyncer(otelsetup.Redacting(exp)). The W3C trace context
// propagator is installed unless one is already set.
func Install(opts ...sdktrace.TracerProviderOption) *Provider {
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	if len(otel.GetTextMapPropagator().Fields()) == 0 {
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	}
	telemetry.SetEnabled(true)
	return &Provider{tp: tp}
}

// TracerProvider is the installed provider (for tests that flush it).
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }
