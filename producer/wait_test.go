package producer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
)

// unfetchedLog records what OnUnfetched is told, and when.
type unfetchedLog struct {
	mu   sync.Mutex
	seen []producer.Unfetched
	at   []time.Time
}

func newUnfetchedLog() *unfetchedLog { return &unfetchedLog{} }

func (l *unfetchedLog) record(u producer.Unfetched) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, u)
	l.at = append(l.at, time.Now())
}

func (l *unfetchedLog) all() ([]producer.Unfetched, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]producer.Unfetched(nil), l.seen...), append([]time.Time(nil), l.at...)
}

func (b *bundle) waitOptions(l *unfetchedLog) producer.WaitOptions {
	return producer.WaitOptions{
		Consumers:   map[string]string{b.ncfg.CommandsStream: b.ncfg.Durable},
		OnUnfetched: l.record,
	}
}

// TestWaitSaysNoDaemonFetches: the streams exist but no daemon runs. Within
// two seconds of publishing, the wait says that the consumer has no
// waiting pull and nothing in flight, naming the stream sequence of the
// stored command; the wait goes on, and a daemon that starts then fetches
// the command and answers it within the same wait, with one effect.
func TestWaitSaysNoDaemonFetches(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	log := newUnfetchedLog()
	opts := b.waitOptions(log)
	opts.OnUnfetched = func(u producer.Unfetched) {
		log.record(u)
		b.startDaemon(t) // OnUnfetched runs on the waiting goroutine: this test's
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	r, err := b.client.PublishAndWaitWith(ctx, charge("evt-u1"), key("evt-u1"), opts)
	require.NoError(t, err)
	require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
	require.Equal(t, key("evt-u1"), r.OperationKey)

	seen, at := log.all()
	require.Len(t, seen, 1, "said once")
	u := seen[0]
	require.Less(t, at[0].Sub(start), 2*time.Second, "said within two seconds")
	require.GreaterOrEqual(t, at[0].Sub(start), producer.DefaultIdleAfter)
	require.Equal(t, b.ncfg.CommandsStream, u.Stream)
	require.Equal(t, uint64(1), u.Seq, "the stored command's sequence: the stream's first")
	require.Equal(t, b.ncfg.Durable, u.Consumer)
	require.False(t, u.Missing)
	require.Equal(t, uint64(1), u.Waiting)
	require.Contains(t, u.String(), "no daemon is fetching from IDEMGATE_COMMANDS")
	require.Contains(t, u.String(), "no waiting pull and nothing in flight")
	require.Contains(t, u.String(), "sequence 1")
	require.Contains(t, u.String(), "a daemon that starts")
	require.Equal(t, 1, b.sandbox.TotalEffects())
}

// TestWaitSaysTheConsumerIsMissing: with the streams but no durable
// consumer (no daemon ever started on them), the wait says the consumer
// does not exist, and ends with the context as before.
func TestWaitSaysTheConsumerIsMissing(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	require.NoError(t, b.js.DeleteConsumer(ctx(t), b.ncfg.CommandsStream, b.ncfg.Durable))
	log := newUnfetchedLog()
	c, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	_, err := b.client.PublishAndWaitWith(c, charge("evt-u2"), key("evt-u2"), b.waitOptions(log))
	var we *producer.WaitError
	require.True(t, errors.As(err, &we), "%v", err)
	seen, _ := log.all()
	require.Len(t, seen, 1)
	require.True(t, seen[0].Missing)
	require.Equal(t, we.Seq, seen[0].Seq)
	require.Contains(t, seen[0].String(), "its consumer idemgate-worker does not exist")
}

// TestWaitSaysNothingWhileADaemonFetches: a daemon that fetches the command
// but has no final answer for it (its operation is not routed) is not
// taken for no daemon; nor is a stream left unnamed in Consumers watched.
func TestWaitSaysNothingWhileADaemonFetches(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	cmd := operation.Command{EventID: "evt-u3", Operation: "invoice.create",
		Payload: []byte(`{"order_id":"order-1","customer_id":"c-1","amount_minor":100,"currency":"RUB"}`)}
	log := newUnfetchedLog()
	c, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	_, err := b.client.PublishAndWaitWith(c, cmd, "test:invoice.create:evt-u3:v1", b.waitOptions(log))
	var we *producer.WaitError
	require.True(t, errors.As(err, &we), "%v", err)
	seen, _ := log.all()
	require.Empty(t, seen, "a daemon fetches from the stream")

	idle := setup(t, false)
	c2, cancel2 := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel2()
	_, err = idle.client.PublishAndWaitWith(c2, charge("evt-u4"), key("evt-u4"), producer.WaitOptions{
		Consumers: map[string]string{"ANOTHER_STREAM": "x"}, OnUnfetched: log.record})
	require.True(t, errors.As(err, &we), "%v", err)
	seen, _ = log.all()
	require.Empty(t, seen, "the command's stream is not watched")
}
