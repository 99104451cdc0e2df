package coordinator_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/process/coordinator"
)

// TestPrepareKeepsDefinitionsAndRefusesToStrand: at start the configured
// definitions are kept by digest; a process still running on an older
// definition finishes on it (it is kept in the set); a configuration under
// which it could not finish — its definition no longer compiles, or an
// operation it sends has no route here — is refused, naming the process.
func TestPrepareKeepsDefinitionsAndRefusesToStrand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	reg := operation.DefaultRegistry()

	old, err := process.Compile("order.checkout", checkout(), reg)
	require.NoError(t, err)
	oldSet, err := process.NewSet("test", old)
	require.NoError(t, err)
	running, err := coordinator.Prepare(ctx, st, oldSet, reg, nil)
	require.NoError(t, err)
	require.Zero(t, running)
	kept, err := st.Definition(ctx, old.Digest)
	require.NoError(t, err)
	require.Equal(t, old.Body, kept.Body)

	// A process starts on the old definition and stays running.
	const key = "test:process.order.checkout:order-stranded:v1"
	c, err := st.ClaimProcess(ctx, journal.ProcessClaimRequest{Key: key, Name: "order.checkout", RequestHash: "h", Digest: old.Digest,
		Owner: "gone", LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, journal.ProcessRun, c.Decision)

	// The configuration changes the process: the running one keeps its own.
	changed := checkout()
	changed.Steps[2].Payload["title"] = "Ship ${input.order_id} today"
	cur, err := process.Compile("order.checkout", changed, reg)
	require.NoError(t, err)
	set, err := process.NewSet("test", cur)
	require.NoError(t, err)
	running, err = coordinator.Prepare(ctx, st, set, reg, func(string) bool { return true })
	require.NoError(t, err)
	require.Equal(t, 1, running)
	got, ok := set.ByDigest(old.Digest)
	require.True(t, ok, "the running process's definition is kept")
	require.Equal(t, old.Digest, got.Digest)

	// Its definition no longer compiles: invoice.cancel is gone.
	lean := operation.NewRegistry()
	for _, n := range reg.Names() {
		if n != operation.TypeInvoiceCancel {
			typ, _ := reg.Lookup(n)
			require.NoError(t, lean.Register(typ))
		}
	}
	fresh, err := process.NewSet("test")
	require.NoError(t, err)
	_, err = coordinator.Prepare(ctx, st, fresh, lean, nil)
	require.ErrorIs(t, err, coordinator.ErrStranded)
	require.ErrorContains(t, err, key)
	require.ErrorContains(t, err, "invoice.cancel does not exist")

	// An operation it sends has no route here.
	fresh, err = process.NewSet("test")
	require.NoError(t, err)
	_, err = coordinator.Prepare(ctx, st, fresh, reg, func(op string) bool { return op != operation.TypePaymentRefund })
	require.ErrorIs(t, err, coordinator.ErrStranded)
	require.ErrorContains(t, err, key+" run on process order.checkout")
	require.ErrorContains(t, err, "sends payment.refund: no route serves it here")
}
