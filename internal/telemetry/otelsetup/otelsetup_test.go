package otelsetup

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestFromEnv: off by default, on with an OTLP endpoint or exporter, off
// when disabled; unsupported values are errors that name the variable.
func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		proto   string
		wantErr string
	}{
		{name: "default off", env: nil},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true, proto: "http/protobuf"},
		{name: "traces endpoint grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, proto: "grpc"},
		{name: "traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true, proto: "http/protobuf"},
		{name: "disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "zipkin", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "OTEL_TRACES_EXPORTER"},
		{name: "http/json", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: "http/json"},
		{name: "b3", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_PROPAGATORS": "b3"}, wantErr: "OTEL_PROPAGATORS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := FromEnv(env(tc.env))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.on, s.Enabled)
			if tc.on {
				require.Equal(t, tc.proto, s.Protocol)
				require.Equal(t, []string{"tracecontext", "baggage"}, s.Propagators)
			}
		})
	}
}

// TestRedactAttrs: URLs keep their origin only, path and query attributes
// go, other strings pass the log redaction rules.
func TestRedactAttrs(t *testing.T) {
	got := redactAttrs([]attribute.KeyValue{
		attribute.String("url.full", "https://b24.example/rest/1/abcdefsecret/crm.deal.add?filter[UF_KEY]=k1"),
		attribute.String("url.path", "/rest/1/abcdefsecret/crm.deal.add"),
		attribute.String("url.query", "filter=k1"),
		attribute.String("error.type", `Post "https://b24.example/rest/1/abcdefsecret/x": EOF`),
		attribute.String("note", "card 4111 1111 1111 1111"),
		attribute.Int("http.response.status_code", 502),
	})
	require.Equal(t, []attribute.KeyValue{
		attribute.String("url.full", "https://b24.example"),
		attribute.String("error.type", `Post "https://b24.example": EOF`),
		got[2],
		attribute.Int("http.response.status_code", 502),
	}, got)
	require.NotContains(t, got[2].Value.AsString(), "4111 1111 1111 1111")
}
