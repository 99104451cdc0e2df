package consumer

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
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

// TestRejectedResultWithoutKey: a rejected result no key could be derived for
// goes to idemgate.res._rejected — inside the results stream — identified by
// its command's stream sequence, so the rejection of a redelivered command is
// stored once; a keyed result keeps its operation's subject and <key>:<status>.
func TestRejectedResultWithoutKey(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	c := Config{}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Ensure(ctx, js, c)
	require.NoError(t, err)

	r := operation.Result{Status: operation.ResultRejected, ErrorCode: "not_json", Reason: "rejected command: not_json", CommandSeq: 42}
	m, err := ResultMsg(r)
	require.NoError(t, err)
	require.Equal(t, wire.RejectedSubject, m.Subject)
	require.Equal(t, "_rejected:42", m.Header.Get(wire.HeaderMsgID))
	require.Empty(t, m.Header.Get(wire.HeaderOperationKey))
	first, err := js.PublishMsg(ctx, m)
	require.NoError(t, err, "the results stream takes %s", wire.RejectedSubject)
	require.Equal(t, c.ResultsStream, first.Stream)
	again, err := ResultMsg(r) // the same command, redelivered and rejected again
	require.NoError(t, err)
	second, err := js.PublishMsg(ctx, again)
	require.NoError(t, err)
	require.True(t, second.Duplicate, "a redelivered rejection is stored once")
	other := r
	other.CommandSeq = 43
	m3, err := ResultMsg(other)
	require.NoError(t, err)
	third, err := js.PublishMsg(ctx, m3)
	require.NoError(t, err)
	require.False(t, third.Duplicate, "another command's rejection is its own")

	keyed := operation.Result{OperationKey: "test:payment.charge:evt-1:v1", Operation: "payment.charge",
		Status: operation.ResultRejected, CommandSeq: 44}
	km, err := ResultMsg(keyed)
	require.NoError(t, err)
	require.Equal(t, "idemgate.res.payment.charge", km.Subject)
	require.Equal(t, "test:payment.charge:evt-1:v1:rejected", km.Header.Get(wire.HeaderMsgID))

	// No registered operation can share the subject.
	require.Error(t, operation.ValidateOperationName(strings.TrimPrefix(wire.RejectedSubject, wire.ResultPrefix)))
}
