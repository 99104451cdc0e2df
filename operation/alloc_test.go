//go:build !race

package operation

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeAllocations keeps Decode's allocations per command in check: the
// strings it keeps (one arena), the fingerprint, the Fields map and its
// boxed values. (The race detector's sync.Pool drops items at random, so the
// count is only meaningful without it.)
func TestDecodeAllocations(t *testing.T) {
	d := &Decoder{Env: "prod"}
	body := []byte(vectorCommand)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := d.Decode(body); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, 12.0, "allocations per Decode")
}
