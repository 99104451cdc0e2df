package worker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/internal/telemetry"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// Tracing of the worker. With tracing off (telemetry.Enabled false) none of
// this runs: a job's span stays nil and every helper returns at its first
// line.
//
// The spans of one command delivery, in the trace its producer started
// (the trace context travels in the command's NATS headers; the consumer
// package starts the delivery's span and the results' spans):
//
//	process <subject>          CONSUMER, one per delivery: decision, status
//	├── execute                one per attempt: attempt, fencing token, error class
//	│   └── HTTP POST          the adapter's call (otelhttp)
//	├── reconcile              a lookup of an unknown outcome
//	│   └── HTTP GET
//	└── publish <result subj>  PRODUCER, until the PubAck; its context
//	                           travels in the result's headers
//
// A claim batch is one "claim" span of its own, linked to the deliveries
// it claimed (a batch serves many traces).

// noSpan is the non-recording span helpers return when tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// traced returns ctx carrying the job's span, so that spans started under
// ctx (attempts, lookups, adapter calls) are its children.
func (j *job) traced(ctx context.Context) context.Context {
	if j.d.Span() == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, j.d.Span())
}

// traceDecoded records what the command is (never its key or payload).
func (j *job) traceDecoded(op operation.Operation) {
	if j.d.Span() != nil {
		j.d.Span().SetAttributes(telemetry.AttrOperationType.String(op.Type), telemetry.AttrTargetSystem.String(op.TargetSystem))
	}
}

// traceDecision records the claim's decision on the delivery's span.
func (j *job) traceDecision() {
	if j.d.Span() != nil {
		j.d.Span().SetAttributes(telemetry.AttrDecision.String(string(j.claim.Decision)),
			telemetry.AttrAttempt.Int(j.claim.Attempt), telemetry.AttrFencingToken.Int64(j.claim.Token))
	}
}

// traceRejected marks a rejected command's span.
func (j *job) traceRejected(code string) {
	if j.d.Span() != nil {
		j.d.Span().SetAttributes(telemetry.AttrErrorCode.String(code))
		j.d.Span().SetStatus(codes.Error, "rejected: "+code)
	}
}

// logAttrs are trace_id and span_id of the delivery's span, for its logs.
func (j *job) logAttrs() []any {
	if j.d.Span() == nil {
		return nil
	}
	return telemetry.LogAttrs(trace.ContextWithSpan(context.Background(), j.d.Span()))
}

// startClaimSpan starts a claim batch's span, linked to its deliveries.
func startClaimSpan(jobs []*job) trace.Span {
	if !telemetry.Enabled() {
		return nil
	}
	links := make([]trace.Link, 0, len(jobs))
	for _, j := range jobs {
		if sp := j.d.Span(); sp != nil {
			links = append(links, trace.Link{SpanContext: sp.SpanContext()})
		}
	}
	_, span := telemetry.Tracer().Start(context.Background(), "claim", trace.WithLinks(links...),
		trace.WithAttributes(telemetry.AttrBatchSize.Int(len(jobs))))
	return span
}

func endClaimSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "claim failed")
	}
	span.End()
}

// startAttemptSpan starts an attempt's span ("execute") under the job's.
func (j *job) startAttemptSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if j.d.Span() == nil {
		return ctx, noSpan
	}
	ctx, span := telemetry.Tracer().Start(trace.ContextWithSpan(ctx, j.d.Span()), name, trace.WithAttributes(
		telemetry.AttrOperationType.String(j.op.Type), telemetry.AttrTargetSystem.String(j.op.TargetSystem),
		telemetry.AttrAttempt.Int(j.claim.Attempt), telemetry.AttrFencingToken.Int64(j.claim.Token)))
	return ctx, span
}

// endAttemptSpan records an attempt's error class and code (nil: success).
func endAttemptSpan(span trace.Span, class adapters.Class, ae *adapters.Error) {
	if !span.IsRecording() {
		return
	}
	if ae != nil {
		span.SetAttributes(telemetry.AttrErrorClass.String(string(class)), telemetry.AttrErrorCode.String(ae.Code))
		span.SetStatus(codes.Error, string(class)+": "+ae.Code)
	}
	span.End()
}

// startLookupSpan starts a reconciliation lookup's span under ctx's span
// (a delivery's, or none for the reconciler's take-overs).
func startLookupSpan(ctx context.Context, op operation.Operation) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, noSpan
	}
	attrs := []attribute.KeyValue{telemetry.AttrOperationType.String(op.Type), telemetry.AttrTargetSystem.String(op.TargetSystem)}
	if a, ok := adapters.AttemptFrom(ctx); ok {
		attrs = append(attrs, telemetry.AttrAttempt.Int(a.Number))
	}
	return telemetry.Tracer().Start(ctx, "reconcile", trace.WithAttributes(attrs...))
}

// endLookupSpan records what the lookup found.
func endLookupSpan(span trace.Span, v verdict) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("idemgate.lookup.status", string(v.status)))
	if v.code != "" {
		span.SetAttributes(telemetry.AttrErrorCode.String(v.code))
	}
	span.End()
}

// observe records a duration, with the trace id as exemplar when the span
// records.
func observe(o prometheus.Observer, d time.Duration, span trace.Span) {
	if span != nil && span.IsRecording() {
		observeTraced(o, d, span.SpanContext().TraceID().String())
		return
	}
	o.Observe(d.Seconds())
}

// observeTraced records a duration with traceID as its exemplar, where the
// observer keeps exemplars (Prometheus exports them in the OpenMetrics
// format).
func observeTraced(o prometheus.Observer, d time.Duration, traceID string) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok {
		eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": traceID})
		return
	}
	o.Observe(d.Seconds())
}

// recordTrace stores the delivery's trace id on the attempt made under the
// job's claim, for `idemgate trace KEY`, when tracing is on and the store
// keeps them (journal.AttemptTraces). A failure costs the trail its trace
// id, nothing else.
func (w *Worker) recordTrace(j *job) {
	sp := j.d.Span()
	if sp == nil || !sp.SpanContext().IsValid() {
		return
	}
	at, ok := w.d.Store.(journal.AttemptTraces)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(w.work, time.Second)
	defer cancel()
	if err := at.SetAttemptTrace(ctx, j.op.Key.String(), j.claim.Token, sp.SpanContext().TraceID().String()); err != nil {
		w.log.Debug("attempt trace id not recorded", "operation_key", j.op.Key.String(), "lease_token", j.claim.Token, "error", err.Error())
	}
}
