package producer

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/internal/telemetry"
)

// publishTraced publishes m under a PRODUCER span ("publish <subject>")
// from the global OpenTelemetry set-up, with the trace context in m's
// headers (lowercase traceparent/tracestate): the daemon's spans for the
// command become this span's children. Without an OpenTelemetry SDK the
// span records nothing, and a trace context already in ctx passes through.
// Attributes name the subject and the operation type only, never the event
// id (a key intent part) or the payload.
func (c *Client) publishTraced(ctx context.Context, m *nats.Msg, opType string) (*jetstream.PubAck, error) {
	ctx, span := telemetry.Tracer().Start(ctx, "publish "+m.Subject, trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrMessagingSystem.String("nats"),
			telemetry.AttrMessagingDestination.String(m.Subject),
			telemetry.AttrMessagingOperation.String("send"),
			telemetry.AttrOperationType.String(opType))
	}
	telemetry.Inject(ctx, m)
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		span.SetStatus(codes.Error, "publish failed")
	} else if ack.Duplicate && span.IsRecording() {
		span.SetAttributes(telemetry.AttrDuplicate.Bool(true))
	}
	return ack, err
}
