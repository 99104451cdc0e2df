// Package telemetry carries OpenTelemetry traces through idemgate: W3C
// trace context in NATS headers (a TextMapCarrier over nats.Header that
// writes the lowercase names other clients read), the span attributes the
// daemon records, and trace ids for logs.
//
// It uses the OpenTelemetry API only, and wire for the rule that reads a
// header name in any casing. The SDK — the tracer provider, the OTLP
// exporter chosen by the standard OTEL_* environment, the redaction of
// exported spans — is in the otelsetup subpackage, which the daemon binary
// imports; libraries (producer) stay light.
//
// Tracing is off until otelsetup turns it on (Enabled): the daemon's hot
// path then does nothing but one atomic load per command.
package telemetry

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/wire"
)

// ScopeName is the instrumentation scope of idemgate's spans.
const ScopeName = "github.com/idemgate/idemgate"

var enabled atomic.Bool

// Enabled reports whether the daemon records traces (otelsetup turned a
// tracer provider on). Libraries that only follow the global OpenTelemetry
// set-up (producer) do not ask.
func Enabled() bool { return enabled.Load() }

// SetEnabled turns the daemon's instrumentation on or off; otelsetup calls
// it with the tracer provider it installs.
func SetEnabled(on bool) { enabled.Store(on) }

// Tracer is idemgate's tracer from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Propagator is the propagator of the trace context: the global one (W3C
// traceparent/tracestate and baggage once otelsetup ran).
func Propagator() propagation.TextMapPropagator { return otel.GetTextMapPropagator() }

// Header is a propagation.TextMapCarrier over NATS headers.
//
// propagation.HeaderCarrier would compile over nats.Header (the same map
// type) but canonicalises names to "Traceparent", and nats.Header.Get is
// case-sensitive: other clients (and nats-server's message tracing) look for
// "traceparent". Header writes the lowercase names the W3C specification
// uses and reads them case-insensitively.
type Header nats.Header

// Get returns the first value of key, matching the name case-insensitively
// (wire.Get).
func (h Header) Get(key string) string { return wire.Get(h, key) }

// Set sets key (lowercased), replacing any other spelling of it.
func (h Header) Set(key, value string) {
	lower := strings.ToLower(key)
	for k := range h {
		if k != lower && strings.EqualFold(k, key) {
			delete(h, k)
		}
	}
	h[lower] = []string{value}
}

// Keys lists the header names.
func (h Header) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the trace context of ctx into the message headers
// (creating them when nil). Nothing is written when ctx has no span.
func Inject(ctx context.Context, m *nats.Msg) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	Propagator().Inject(ctx, Header(m.Header))
}

// Extract returns ctx with the trace context the headers carry, if any.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return Propagator().Extract(ctx, Header(h))
}

// ExtractHTTP returns ctx with the trace context an HTTP request's headers
// carry (an agent's traceparent), if any, so that the command it submits
// continues the agent's trace.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return Propagator().Extract(ctx, propagation.HeaderCarrier(h))
}

// Attribute keys of idemgate's spans. Values are never key intent parts,
// payload values or secrets: operation types, decisions, statuses, error
// classes and codes, target system names, counters and tokens.
const (
	AttrOperationType = attribute.Key("idemgate.operation.type")
	AttrDecision      = attribute.Key("idemgate.claim.decision")
	AttrStatus        = attribute.Key("idemgate.status")
	AttrErrorClass    = attribute.Key("idemgate.error.class")
	AttrErrorCode     = attribute.Key("idemgate.error.code")
	AttrTargetSystem  = attribute.Key("idemgate.target.system")
	AttrAttempt       = attribute.Key("idemgate.attempt")
	AttrFencingToken  = attribute.Key("idemgate.fencing_token")
	AttrReplayed      = attribute.Key("idemgate.replayed")
	AttrBatchSize     = attribute.Key("idemgate.batch.size")
	AttrDuplicate     = attribute.Key("idemgate.publish.duplicate")
	AttrWebhookSource = attribute.Key("idemgate.webhook.source")
	AttrDeliveries    = attribute.Key("messaging.nats.delivery_count")
	// Messaging semantic conventions (messaging.message.id is left out:
	// the Nats-Msg-Id of a command is its event id, a key intent part).
	AttrMessagingSystem      = attribute.Key("messaging.system")
	AttrMessagingDestination = attribute.Key("messaging.destination.name")
	AttrMessagingOperation   = attribute.Key("messaging.operation.type")
	AttrMessagingConsumer    = attribute.Key("messaging.consumer.group.name")
)

// LogAttrs returns trace_id and span_id of the span in ctx, for a logger's
// With; nothing when ctx holds no valid span.
func LogAttrs(ctx context.Context) []any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}
