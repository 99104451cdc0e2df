package demo

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/sandbox"
)

// TestRunSkipsWhatIsNotWired: scenarios whose operation has no route, or
// that need a second replica nobody can start, are skipped with a reason;
// a demo where nothing ran does not pass.
func TestRunSkipsWhatIsNotWired(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	store, err := sqlite.Open(context.Background(), t.TempDir()+"/journal.db", sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	sb, err := StartSandboxes(sandbox.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sb.Close()) })

	var out bytes.Buffer
	rep, err := Run(context.Background(), Runtime{Env: "test", NATSURL: ns.URL(), Journal: store, Sandboxes: sb,
		Routes: map[string]string{"crm.deal.create": "bitrix24"}}, Options{Out: &out, Only: []string{"invoice", "replicas"}})
	require.NoError(t, err)
	require.Len(t, rep.Rows, 2)
	require.Equal(t, "no adapter is routed for invoice.create in this build", rep.Rows[0].Skipped)
	require.Equal(t, "no adapter is routed for payment.charge in this build", rep.Rows[1].Skipped)
	require.False(t, rep.Pass(), "nothing ran")
	require.Contains(t, out.String(), "[1/2] invoice (1C)")
	require.Contains(t, out.String(), "skipped: no adapter is routed for invoice.create")

	rep, err = Run(context.Background(), Runtime{Env: "test", NATSURL: ns.URL(), Journal: store, Sandboxes: sb,
		Routes: map[string]string{"payment.charge": "yookassa"}}, Options{Only: []string{"replicas"}})
	require.NoError(t, err)
	require.Equal(t, "no second replica can be started here", rep.Rows[0].Skipped)
}

func TestRunNeedsARuntime(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), Runtime{}, Options{})
	require.ErrorIs(t, err, ErrSetup)
	_, err = Run(context.Background(), Runtime{Env: "test", NATSURL: "nats://127.0.0.1:1", Journal: nil, Sandboxes: &Sandboxes{}}, Options{})
	require.ErrorIs(t, err, ErrSetup)
}
