package consumer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
)

// TestEnsureRetryingWaitsForAFormingCluster: a daemon started beside a
// cluster that has no meta leader yet (one node of three up) is told
// JetStream is not ready, waits, and sets its streams up once the other
// nodes join, where a single Ensure gives up.
func TestEnsureRetryingWaitsForAFormingCluster(t *testing.T) {
	cl := natstest.NewCluster(t, 3)
	cl.Start(t, 0)
	nc, err := nats.Connect(cl.Servers[0].ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	c := Config{Replicas: 3}.WithDefaults()

	// Without retries the lone node's JetStream fails the set-up.
	octx, ocancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = Ensure(octx, js, c)
	ocancel()
	require.Error(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		retries []error
		joined  sync.Once
	)
	cons, err := EnsureRetrying(ctx, js, c, 90*time.Second, func(err error, wait time.Duration) {
		mu.Lock()
		retries = append(retries, err)
		t.Logf("retry in %s after: %v", wait, err)
		mu.Unlock()
		joined.Do(func() {
			cl.Start(t, 1)
			cl.Start(t, 2)
		})
	})
	require.NoError(t, err)
	require.NotEmpty(t, retries, "the set-up must have met the forming cluster")
	for _, e := range retries {
		require.True(t, ensureTransient(e), "retried a final error: %v", e)
	}
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, c.Durable, info.Name)
	st, err := js.Stream(ctx, c.CommandsStream)
	require.NoError(t, err)
	require.Equal(t, 3, st.CachedInfo().Config.Replicas)
}

// TestEnsureRetryingReturnsFinalErrorsAtOnce: a stream that exists with
// another replica count is a configuration error, answered on the first
// pass without a retry.
func TestEnsureRetryingReturnsFinalErrorsAtOnce(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := Config{Replicas: 1}.WithDefaults()
	_, err := EnsureRetrying(ctx, js, c, time.Minute, nil)
	require.NoError(t, err)

	c.Replicas = 3
	retried := 0
	_, err = EnsureRetrying(ctx, js, c, time.Minute, func(error, time.Duration) { retried++ })
	var mismatch *ReplicasMismatchError
	require.ErrorAs(t, err, &mismatch)
	require.Zero(t, retried)
}

// TestEnsureTransientClassifiesJetStreamAnswers: which answers of a
// JetStream the set-up retries (not ready yet) and which it returns at
// once (a configuration it refuses).
func TestEnsureTransientClassifiesJetStreamAnswers(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"no meta leader yet (503)", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{"forming cluster: no suitable peers", &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement"}, true},
		{"stream name in use with another config", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse, Description: "stream name already in use with a different configuration"}, false},
		{"request timed out", nats.ErrTimeout, true},
		{"a plain error", errors.New("boom"), false},
	} {
		require.Equal(t, c.transient, ensureTransient(c.err), c.name)
	}
}
