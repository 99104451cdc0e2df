package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReconcileWithoutNATS: with no nats.url and no daemon serving the
// embedded NATS, `idemgate reconcile` still runs its pass on the journal,
// says that results are left to the commands' next deliveries, and exits 0
// when nothing failed; it prints what it found.
func TestReconcileWithoutNATS(t *testing.T) {
	cfg := writeConfig(t, fmt.Sprintf("env: test\ndata_dir: %q\nnats: {embedded_addr: %q}\n", t.TempDir(), refusingAddr(t)))
	code, _, stderr := runTool(t, "migrate", "up", "--config", cfg)
	require.Equal(t, exitOK, code, stderr)
	code, out, stderr := runTool(t, "reconcile", "--config", cfg)
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "found 0, not found 0, unsettled 0, raised for review 0, retryable and idle 0, failed 0\n", out)
	require.Contains(t, stderr, "results are not published now; each command's next delivery replays its result once the daemon runs")
	require.Contains(t, stderr, "is the daemon running with this configuration?")
}
