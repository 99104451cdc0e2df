package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Not parallel: AllocsPerRun needs the process to itself.
func TestPosition(t *testing.T) {
	keys := []string{"a", "a:b", "b", "b-", "c~"}
	for j, k := range keys {
		require.Equal(t, j, position(keys, []byte(k)), k)
	}
	for _, k := range []string{"", "0", "a:", "bb", "c", "d", "c~~"} {
		require.Equal(t, -1, position(keys, []byte(k)), k)
	}
	require.Equal(t, -1, position(nil, []byte("a")))
	raw := []byte("b-")
	require.Zero(t, testing.AllocsPerRun(100, func() { position(keys, raw) }), "a returned key is compared without a copy")
}

func TestFirstOfEachKey(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "a", "b", "c", "c", "c"}
	key := func(i int) string { return keys[i] }
	first, repeats := firstOfEachKey([]int{0, 1, 2, 3, 4, 5}, key)
	require.Equal(t, []int{0, 2, 3}, first)
	require.Equal(t, []int{1, 4, 5}, repeats)
	first, repeats = firstOfEachKey(repeats, key)
	require.Equal(t, []int{1, 4}, first)
	require.Equal(t, []int{5}, repeats)
	first, repeats = firstOfEachKey([]int{0, 2, 3}, key)
	require.Equal(t, []int{0, 2, 3}, first)
	require.Nil(t, repeats)
}
