package otelsetup

import (
	"context"
	"net/url"
	"regexp"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idemgate/idemgate/redact"
)

// Redacting wraps an exporter so that every span it exports is redacted
// first (see the package documentation).
func Redacting(exp sdktrace.SpanExporter) sdktrace.SpanExporter { return redactingExporter{exp} }

type redactingExporter struct{ sdktrace.SpanExporter }

func (e redactingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = redactedSpan{s}
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

// redactedSpan is a span as exported: its attributes, events and status
// description redacted.
type redactedSpan struct{ sdktrace.ReadOnlySpan }

// Attribute keys that hold a URL's path or query (HTTP semantic
// conventions, old and new): dropped.
var droppedKeys = map[attribute.Key]bool{
	"url.path": true, "url.query": true, "url.original": true, "url.template": true,
	"http.target": true, "http.route": true,
}

// Attribute keys that hold a whole URL: reduced to scheme://host.
var urlKeys = map[attribute.Key]bool{"url.full": true, "http.url": true}

func redactAttrs(in []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(in))
	for _, kv := range in {
		switch {
		case droppedKeys[kv.Key]:
			continue
		case urlKeys[kv.Key]:
			out = append(out, kv.Key.String(origin(kv.Value.AsString())))
		case kv.Value.Type() == attribute.STRING:
			out = append(out, kv.Key.String(redactText(kv.Value.AsString())))
		default:
			out = append(out, kv)
		}
	}
	return out
}

// origin keeps scheme://host[:port] of a URL.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "[url]"
	}
	return u.Scheme + "://" + u.Host
}

var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"']+`)

// redactText replaces URLs (Go's url.Error quotes the whole URL) by their
// origin and applies the log redaction rules.
func redactText(s string) string {
	s = urlInText.ReplaceAllStringFunc(s, origin)
	return redact.String(s)
}

func (s redactedSpan) Attributes() []attribute.KeyValue {
	return redactAttrs(s.ReadOnlySpan.Attributes())
}

func (s redactedSpan) Status() sdktrace.Status {
	st := s.ReadOnlySpan.Status()
	st.Description = redactText(st.Description)
	return st
}

func (s redactedSpan) Events() []sdktrace.Event {
	return redactEach(s.ReadOnlySpan.Events(), func(e *sdktrace.Event) *[]attribute.KeyValue { return &e.Attributes })
}

func (s redactedSpan) Links() []sdktrace.Link {
	return redactEach(s.ReadOnlySpan.Links(), func(l *sdktrace.Link) *[]attribute.KeyValue { return &l.Attributes })
}

// redactEach returns a copy of items, the attributes of each (attrs)
// redacted.
func redactEach[T any](items []T, attrs func(*T) *[]attribute.KeyValue) []T {
	out := make([]T, len(items))
	for i, it := range items {
		a := attrs(&it)
		*a = redactAttrs(*a)
		out[i] = it
	}
	return out
}
