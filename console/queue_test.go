package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// TestUnresolvedQueueCollapsesIdenticalLookups: an operation looked up 68
// times with the same answer shows one line for them ("68 lookups since
// …, all …"), not 68 rows; a different answer between two runs stays its
// own line, so the order of what the target said is kept.
func TestUnresolvedQueueCollapsesIdenticalLookups(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine, nil)
		key := f.unknown(t, "looked-up")
		ctx := context.Background()
		round := func(note string) journal.Attempt {
			t.Helper()
			c, err := journal.ClaimOne(ctx, f.store, journal.ClaimRequest{Key: key, OperationType: "crm.task.create", RequestHash: "h",
				TargetSystem: "crm", EventID: "evt-looked-up", Owner: "w1", LeaseTTL: time.Minute})
			require.NoError(t, err)
			require.Equal(t, journal.Reconcile, c.Decision)
			require.NoError(t, journal.CompleteOne(ctx, f.store, journal.Completion{Key: key, Token: c.Token, Status: journal.StatusUnknown,
				Reconciled: true, ErrorCode: "timeout", Note: note}))
			atts, err := f.store.Attempts(ctx, key)
			require.NoError(t, err)
			return atts[len(atts)-1]
		}
		var first, last journal.Attempt
		for i := range 68 {
			a := round("lookup failed: http_503")
			if i == 0 {
				first = a
			}
			last = a
		}
		round("lookup indeterminate")
		round("lookup failed: http_503")
		round("lookup failed: http_503")

		b := f.client(t)
		require.Equal(t, http.StatusSeeOther, b.login(viewerToken))
		code, page, _ := b.do("GET", "/ui/unresolved", nil)
		require.Equal(t, http.StatusOK, code)
		ts := func(a journal.Attempt) string { return a.FinishedAt.UTC().Format("2006-01-02 15:04:05.000Z") }
		require.Contains(t, page, "<b>68 lookups</b> since "+ts(first)+", all unknown: lookup failed: http_503 (the last at "+ts(last)+")")
		require.Contains(t, page, "reconcile unknown: lookup indeterminate")
		require.Contains(t, page, "<b>2 lookups</b> since ")
		require.Contains(t, page, "execute unknown: call timed out after send")
		require.Equal(t, 4, strings.Count(page, "<li>"), "the unknown call, 68 lookups, one other, then 2 more: four lines")
	})
}
