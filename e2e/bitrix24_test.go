package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBitrix24LateAddWithDefaultSettleTime: a replica killed while its
// crm.activity.add is still held by the portal (lateLanding, longer than
// the adapter's timeout and the daemon's call timeout) must not leave a
// second task once that add lands. The survivor takes over; its lookup's
// "not found" counts only after the adapter's settle time, whose default is
// twice the adapter's timeout, so by then the late add has landed and is
// found: one task. With the former default (0) the survivor's lookup was
// trusted at once, it executed again, and the late add made a second task
// nobody reported. Unlike check 12 of TestArticleChecks, the daemons here
// configure no settle_time: this is the default at work.
func TestBitrix24LateAddWithDefaultSettleTime(t *testing.T) {
	skipShort(t)
	var tgt target
	for _, x := range targets {
		if x.adapter == "bitrix24" {
			tgt = x
		}
	}
	require.NotEmpty(t, tgt.name, "no bitrix24 target in the table")
	tgt.start = startBitrix24(0)
	c := newCluster(t, tgt)
	ds := c.startDaemons("bitrix24-replica-a", "bitrix24-replica-b")
	lateLandingScenario(t, c, ds, "order-late-1")
}
