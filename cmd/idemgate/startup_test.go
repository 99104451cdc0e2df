package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestRunUnwindsWhenALaterServiceFails: when a service cannot start (its
// port is taken), run stops every service it had started — listeners are
// free again and no goroutine is left behind — and says why.
func TestRunUnwindsWhenALaterServiceFails(t *testing.T) {
	for _, taken := range []string{"nats", "ingest", "admin"} {
		t.Run(taken, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer busy.Close()
			// Addresses known beforehand, to check afterwards that each is
			// free again: reserved, so that nothing else takes one meanwhile.
			addrs := map[string]string{"nats": reservedAddr(t), "ingest": reservedAddr(t), "admin": reservedAddr(t)}
			addrs[taken] = busy.Addr().String()
			c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, fmt.Sprintf(`
env: test
data_dir: %q
admin: {addr: %q}
nats: {embedded_addr: %q}
ingest:
  enabled: true
  addr: %q
  sources:
    - name: payments
      scheme: stripe
      secrets: [whsec_test_unwind]
      routes:
        - event: payment_intent.succeeded
          operation: crm.task.create
          intent_paths: [data.object.id]
          payload:
            - {field: title, value: "Call the customer"}
            - {field: responsible_id, value: "7"}
`, t.TempDir(), addrs["admin"], addrs["nats"], addrs["ingest"]))))
			require.NoError(t, err)
			require.NoError(t, c.validate())
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err = runDaemon(ctx, c, newLogger(c, &logs), nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), busy.Addr().String(), "the error names the taken address")
			for name, addr := range addrs {
				if name == taken {
					continue
				}
				ln, err := net.Listen("tcp", addr)
				require.NoError(t, err, "%s listener %s is still held", name, addr)
				require.NoError(t, ln.Close())
			}
		})
	}
}
