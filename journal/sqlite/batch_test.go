package sqlite

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzBatchJSON checks that a batch parameter decodes to exactly the fields
// it was built from.
func FuzzBatchJSON(f *testing.F) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "new\nline", "\x01\x1f\x7f", "<&>", "ключ", "😀", "\u2028\u2029"} {
		f.Add(s, int64(-1))
	}
	f.Fuzz(func(t *testing.T, s string, n int64) {
		if !utf8.ValidString(s) {
			t.Skip("the store rejects invalid UTF-8 before building a batch")
		}
		j := newBatchJSON(2, 16)
		j.key(s)
		j.begin()
		j.str(s)
		j.int(n)
		j.null()
		j.end()
		dec := json.NewDecoder(strings.NewReader(j.String()))
		dec.UseNumber()
		var got []any
		require.NoError(t, dec.Decode(&got))
		require.Len(t, got, 2)
		require.Equal(t, s, got[0])
		item, ok := got[1].([]any)
		require.True(t, ok)
		require.Len(t, item, 3)
		require.Equal(t, s, item[0])
		require.Equal(t, json.Number(strconv.FormatInt(n, 10)), item[1])
		require.Nil(t, item[2])
	})
}
