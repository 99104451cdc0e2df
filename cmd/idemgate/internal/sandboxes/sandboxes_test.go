package sandboxes

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
)

// Every emulator of the list starts, answers its admin API, and has a full
// description: an emulator added to All and not to Describe fails here.
func TestEveryEmulatorIsServedAndDescribed(t *testing.T) {
	t.Parallel()
	g, err := All(sandbox.Options{})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"onec", "bitrix24", "amocrm", "yookassa", "tbank", "stripe"}, g.Names())
	require.NoError(t, g.Start(nil))
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	infos := make([]TargetInfo, 0, len(g))
	for _, tg := range g {
		resp, err := http.Get(tg.URL() + "/_sandbox/ledger")
		require.NoError(t, err, tg.Name())
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, tg.Name())
		in := Describe(tg)
		require.Equal(t, tg.Name(), in.Name)
		require.NotEmpty(t, in.Endpoints, tg.Name())
		require.NotEmpty(t, in.Auth, tg.Name())
		require.NotEmpty(t, in.Credentials, tg.Name())
		require.NotEmpty(t, in.Config, tg.Name())
		infos = append(infos, in)
	}
	var out strings.Builder
	require.NoError(t, WriteTargets(&out, infos))
	for _, tg := range g {
		require.Contains(t, out.String(), tg.Name()+"  "+tg.URL()+"\n")
		require.Contains(t, out.String(), "\n  "+tg.Name()+":\n", "a configuration block for %s", tg.Name())
	}
}
