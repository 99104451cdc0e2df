package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/telemetry"
)

// TestTracingFromEnvironment: tracing stays off without OTEL_* settings,
// turns on with an OTLP endpoint (the exporter connects lazily) and off
// again at stop; a setting it cannot honour stops `run`, `ingest` and `mcp`
// with exit 78 before they start. Not parallel: it sets the environment and
// the global tracer provider.
func TestTracingFromEnvironment(t *testing.T) {
	log := quietLog()
	stop, err := startTracing(context.Background(), log)
	require.NoError(t, err)
	require.False(t, telemetry.Enabled(), "off by default")
	stop()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	stop, err = startTracing(context.Background(), log)
	require.NoError(t, err)
	require.True(t, telemetry.Enabled())
	stop()
	require.False(t, telemetry.Enabled(), "stop turns it off")

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	cfg := writeConfig(t, `
env: test
ingest:
  sources:
    - name: payments
      scheme: stripe
      secrets: ["whsec_x"]
`)
	for _, cmd := range []string{"run", "ingest", "mcp"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{cmd, "--config", cfg, "--data-dir", t.TempDir()}, &out, &errb)
		require.Equal(t, exitConfig, code, "%s: %s", cmd, errb.String())
		require.Contains(t, errb.String(), "OTEL_TRACES_EXPORTER", cmd)
	}
}
