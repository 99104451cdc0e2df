package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/testkit/pgproc"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// TestJournalOutageOutlastsMaxDeliver (budget ≤ 90 s): the journal is down
// for longer than nats.max_deliver deliveries take (max_deliver 3: about
// 1.5 s of backoff), while commands keep arriving. Each command still
// waiting for the journal on its last delivery is requeued, not dropped,
// so once PostgreSQL is back every command gets its final result and the
// target holds one effect per intent. Before requeueing, these commands got
// no result, no row and no log line.
func TestJournalOutageOutlastsMaxDeliver(t *testing.T) {
	skipShort(t)
	dir, err := os.MkdirTemp("", "idemgate-e2e-outage-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	pg, err := pgproc.InitPrimary(filepath.Join(dir, "pg"), "idemgate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Remove(); _ = os.RemoveAll(dir) })

	tgt := targetNamed(t, "1c_invoice")
	c := &cluster{t: t, tgt: tgt, dir: t.TempDir(), dsn: fmt.Sprintf("postgres://postgres@%s/idemgate?sslmode=disable&connect_timeout=2", pg.Addr())}
	c.sb = tgt.start(t)
	c.embeddedNATS()
	dc := c.fleet(c.ns.URL(), 1, 1)
	dc.maxDeliver = 3
	dc.extra = c.sb.configYAML
	ds := c.startFleet([]string{"outage-replica"}, c.configWith(dc))
	d := ds[0]

	before := c.send(c.command("ev-outage-0", "outage-0", false))
	require.Equal(t, operation.ResultSucceeded, before.Status, "%+v", before)

	require.NoError(t, pg.StopImmediate())
	down := time.Now()
	var waiting []<-chan asyncResult
	intents := []string{"outage-0"}
	for i := 1; i <= 6; i++ {
		in := fmt.Sprintf("outage-%d", i)
		intents = append(intents, in)
		waiting = append(waiting, c.sendAsync(c.command("ev-"+in, in, false)))
		if i%2 == 0 { // a copy of the same intent, as a retrying agent sends
			waiting = append(waiting, c.sendAsync(c.command(fmt.Sprintf("ev-%s-copy", in), in, false)))
		}
		time.Sleep(500 * time.Millisecond)
	}
	waitFor(t, 45*time.Second, "commands requeued while the journal is down", func() (bool, string) {
		n := d.metric(t, "idemgate_commands_requeued_total")
		return n >= 6, fmt.Sprintf("%v requeued", n)
	})
	require.NoError(t, pg.Start())
	t.Logf("journal down for %v", time.Since(down).Round(time.Millisecond))

	for _, w := range waiting {
		r := c.await(w)
		require.Equal(t, operation.ResultSucceeded, r.res.Status, "%+v", r.res)
	}
	c.openStore(t.Context())
	byKey := c.sb.core.Ledger().ByKey()
	for _, in := range intents {
		require.Equal(t, 1, byKey[c.key(in)], "intent %s: effects in the target", in)
		rec, atts := c.row(c.key(in))
		require.Equal(t, journal.StatusSucceeded, rec.Status, "%s: %s", in, describe(rec, atts))
	}
	require.Equal(t, len(intents), c.sb.core.Ledger().Total(), "effects = intents")
	require.Zero(t, d.metric(t, "idemgate_commands_given_up_total"))
}
