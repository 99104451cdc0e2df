package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRecentForgetsOldAndOverflow(t *testing.T) {
	var r recent
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r.add("a", t0)
	require.True(t, r.has("a", t0.Add(time.Minute)))
	require.False(t, r.has("a", t0.Add(recentTTL)), "expired")
	r.add("b", t0.Add(recentTTL))
	require.False(t, r.has("a", t0.Add(recentTTL)))
	require.Len(t, r.at, 1, "the expired key is gone")
	for i := range recentMax + 10 {
		r.add(fmt.Sprint(i), t0.Add(recentTTL+time.Second))
	}
	require.LessOrEqual(t, len(r.at), recentMax)
	require.True(t, r.has(fmt.Sprint(recentMax+9), t0.Add(recentTTL+time.Second)), "the newest stays")
	require.False(t, r.has("0", t0.Add(recentTTL+time.Second)), "the oldest went first")
}
