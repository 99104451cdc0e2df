package sandbox_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
	_ "github.com/idemgate/idemgate/sandbox/amocrm"
	_ "github.com/idemgate/idemgate/sandbox/bitrix24"
	_ "github.com/idemgate/idemgate/sandbox/onec"
)

func TestRunAllServesRegisteredEmulators(t *testing.T) {
	t.Parallel()
	names := sandbox.DefaultRegistry.Names()
	require.Subset(t, names, []string{"amocrm", "bitrix24", "onec"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	urls := make(chan map[string]string, 1)
	go func() {
		done <- sandbox.RunAll(ctx, map[string]string{"onec": "", "bitrix24": "", "amocrm": ""}, sandbox.Options{}, func(u map[string]string) { urls <- u })
	}()
	got := <-urls
	require.Len(t, got, 3)
	for _, u := range got {
		resp, err := http.Get(u + "/_sandbox/ledger")
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	cancel()
	require.NoError(t, <-done)
}
