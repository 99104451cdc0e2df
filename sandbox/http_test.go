package sandbox_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
)

// The paging helpers the emulators share: a page size within bounds, an
// opaque cursor that reads back only what it wrote, and pages that end.
func TestPaging(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]struct {
		n  int
		ok bool
	}{"": {10, true}, "limit=1": {1, true}, "limit=100": {100, true}, "limit=0": {0, false}, "limit=101": {0, false}, "limit=x": {0, false}} {
		v, err := url.ParseQuery(q)
		require.NoError(t, err)
		n, ok := sandbox.QueryLimit(v, "limit", 10, 100)
		require.Equal(t, want.ok, ok, q)
		require.Equal(t, want.n, n, q)
	}

	pos, ok := sandbox.CursorPos(sandbox.Cursor(42))
	require.True(t, ok)
	require.Equal(t, 42, pos)
	for _, bad := range []string{"bm9wZQ", "!!", sandbox.Cursor(-1)} {
		_, ok := sandbox.CursorPos(bad)
		require.False(t, ok, bad)
	}

	items := []int{1, 2, 3, 4, 5}
	page, next := sandbox.Page(items, 0, 2)
	require.Equal(t, []int{1, 2}, page)
	require.Equal(t, 2, next)
	page, next = sandbox.Page(items, 4, 2)
	require.Equal(t, []int{5}, page)
	require.Equal(t, -1, next)
	page, next = sandbox.Page(items, 9, 2)
	require.Empty(t, page)
	require.Equal(t, -1, next)
	page, _ = sandbox.Page(items, 0, 2)
	page[0] = 0
	require.Equal(t, 1, items[0], "a page is a copy")
}

func TestCredentialChecks(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth("shop", "secret")
	require.True(t, sandbox.BasicAuthorized(r, "shop", "secret"))
	require.False(t, sandbox.BasicAuthorized(r, "shop", "other"))
	require.False(t, sandbox.BasicAuthorized(httptest.NewRequest(http.MethodGet, "/", nil), "", ""))

	r = httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer tok")
	require.Equal(t, "tok", sandbox.BearerToken(r))
	r.Header.Set("Authorization", "Basic tok")
	require.Empty(t, sandbox.BearerToken(r))
	require.Equal(t, int64(2), sandbox.RetryAfterSeconds(1500*time.Millisecond))
}
