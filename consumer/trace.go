package consumer

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/internal/telemetry"
	"github.com/idemgate/idemgate/operation"
)

// Tracing of deliveries. With tracing off (telemetry.Enabled false) a
// delivery's span stays nil and nothing here runs past its first line.
//
// Each delivery is a CONSUMER span "process <subject>" continuing the trace
// its command's headers carry (the producer's publish span is its parent);
// the handler's work (claim decision, attempts, lookups) hangs under it
// (Delivery.Span); each result is a PRODUCER span "publish <subject>" under
// it, open until the PubAck, whose context travels in the result's headers.

// startDeliverySpan starts a delivery's span; nil when tracing is off.
func startDeliverySpan(m jetstream.Msg) trace.Span {
	if !telemetry.Enabled() {
		return nil
	}
	ctx := telemetry.Extract(context.Background(), m.Headers())
	attrs := []attribute.KeyValue{
		telemetry.AttrMessagingSystem.String("nats"),
		telemetry.AttrMessagingDestination.String(m.Subject()),
		telemetry.AttrMessagingOperation.String("process"),
	}
	if md, err := m.Metadata(); err == nil {
		attrs = append(attrs, telemetry.AttrMessagingConsumer.String(md.Consumer),
			telemetry.AttrDeliveries.Int64(int64(md.NumDelivered)))
	}
	_, span := telemetry.Tracer().Start(ctx, "process "+m.Subject(),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	return span
}

// Span is the delivery's span, nil when tracing is off: the handler sets
// its attributes and starts its own spans under it.
func (d *Delivery) Span() trace.Span { return d.span }

// tracePublish starts a result's PRODUCER span under the delivery's, writes
// its context into the result's headers, and returns then wrapped to end
// the span with the PubAck's outcome.
func (d *Delivery) tracePublish(m *nats.Msg, res operation.Result, then func(error)) func(error) {
	if d.span == nil {
		return then
	}
	d.span.SetAttributes(telemetry.AttrStatus.String(string(res.Status)), telemetry.AttrReplayed.Bool(res.Replayed))
	ctx, span := telemetry.Tracer().Start(trace.ContextWithSpan(context.Background(), d.span), "publish "+m.Subject,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			telemetry.AttrMessagingSystem.String("nats"), telemetry.AttrMessagingDestination.String(m.Subject),
			telemetry.AttrMessagingOperation.String("send"), telemetry.AttrStatus.String(string(res.Status)),
			telemetry.AttrReplayed.Bool(res.Replayed)))
	telemetry.Inject(ctx, m)
	return func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, "result not acknowledged by JetStream")
		}
		span.End()
		then(err)
	}
}

// endSpan ends the delivery's span; settled calls it once per delivery.
// It returns the trace id when the span recorded ("" otherwise), for
// exemplars.
func (d *Delivery) endSpan() string {
	if d.span == nil {
		return ""
	}
	d.span.End()
	if sc := d.span.SpanContext(); sc.IsSampled() {
		return sc.TraceID().String()
	}
	return ""
}
