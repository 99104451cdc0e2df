package ingest

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/internal/telemetry"
)

// traceCommand starts the PRODUCER span of a webhook's command ("publish
// <subject>"), a child of the sender's trace context when the webhook
// carries one, and writes its trace context into msg's headers: the
// daemon's spans for the command join the trace. end closes the span.
// Only the source name, the subject and the operation type are recorded.
func traceCommand(r *http.Request, msg *nats.Msg, source, opType string) (ctx context.Context, end func(failed bool)) {
	ctx = r.Context()
	if !telemetry.Enabled() {
		return ctx, func(bool) {}
	}
	ctx = telemetry.Propagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
	ctx, span := telemetry.Tracer().Start(ctx, "publish "+msg.Subject, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(telemetry.AttrMessagingSystem.String("nats"),
			telemetry.AttrMessagingDestination.String(msg.Subject),
			telemetry.AttrMessagingOperation.String("send"),
			telemetry.AttrOperationType.String(opType),
			telemetry.AttrWebhookSource.String(source)))
	telemetry.Inject(ctx, msg)
	return ctx, func(failed bool) {
		if failed {
			span.SetStatus(codes.Error, "publish failed")
		}
		span.End()
	}
}
