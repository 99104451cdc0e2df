package e2e

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// knownIssues runs tests that show open defects; they fail until fixed.
// Without IDEMGATE_E2E_KNOWN_ISSUES=1 they are skipped, loudly.
func knownIssues(t *testing.T, issue string) {
	t.Helper()
	skipShort(t)
	if os.Getenv("IDEMGATE_E2E_KNOWN_ISSUES") == "" {
		t.Skipf("KNOWN ISSUE, skipped (set IDEMGATE_E2E_KNOWN_ISSUES=1 to see it fail): %s", issue)
	}
}

// TestKnownIssueBitrix24LateAddWithoutSettleTime: with the Bitrix24
// adapter's default settle_time (0), a replica killed while its
// crm.activity.add is still queued in the portal leaves a second task once
// that add lands: the survivor takes over, its lookup finds nothing yet and
// is trusted at once, it executes again with the same key, and the late add
// creates another activity with the same ORIGIN_ID. The adapter's
// re-list-after-add cannot report it either: the survivor re-listed before
// the late add landed, and the dead owner never re-lists. Check 12 of
// TestArticleChecks passes only because it configures settle_time above the
// time the add is held.
func TestKnownIssueBitrix24LateAddWithoutSettleTime(t *testing.T) {
	knownIssues(t, "Bitrix24 default settle_time 0: a dead owner's late crm.activity.add duplicates the task, undetected")
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
