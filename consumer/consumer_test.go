package consumer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
)

// TestEnsureIsStableAndConcurrent: replicas start together and call Ensure
// at once; the streams end as configured, and a second Ensure finds them
// equal (no needless update).
func TestEnsureIsStableAndConcurrent(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	c := Config{}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := Ensure(ctx, js, c)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, want := range []struct{ name string }{{c.CommandsStream}, {c.ResultsStream}} {
		st, err := js.Stream(ctx, want.name)
		require.NoError(t, err)
		cfg := c.CommandsStreamConfig()
		if want.name == c.ResultsStream {
			cfg = c.ResultsStreamConfig()
		}
		require.True(t, sameStream(st.CachedInfo().Config, cfg), "%s as configured: %+v", want.name, st.CachedInfo().Config)
	}
	cons, err := js.Consumer(ctx, c.CommandsStream, c.Durable)
	require.NoError(t, err)
	require.True(t, sameConsumer(cons.CachedInfo().Config, c.ConsumerConfig()), "%+v", cons.CachedInfo().Config)
	// A changed setting is applied.
	c.DuplicateWindow = 5 * time.Minute
	c.AckWait = 90 * time.Second
	got, err := Ensure(ctx, js, c)
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, got.CachedInfo().Config.AckWait)
	st, err := js.Stream(ctx, c.CommandsStream)
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, st.CachedInfo().Config.Duplicates)
}
