package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/worker"
)

// stealingStore plays another replica that claims key the moment this
// worker's retryable failure's hold ends, just before the worker's own
// re-claim of it reaches the journal: the worker then finds the operation
// in another owner's hands (the hand-off), as a replica whose copy was
// redelivered at the right moment would leave it.
type stealingStore struct {
	journal.Store
	key string

	mu     sync.Mutex
	claims int // claims of key by the worker
	stolen chan journal.Claim
}

func (s *stealingStore) Claim(ctx context.Context, reqs []journal.ClaimRequest) ([]journal.Claim, error) {
	for _, r := range reqs {
		if r.Key != s.key {
			continue
		}
		s.mu.Lock()
		s.claims++
		second := s.claims == 2
		s.mu.Unlock()
		if second { // the worker's re-claim after its first attempt failed
			other := r
			other.Owner = "replica-2"
			for {
				c, err := journal.ClaimOne(ctx, s.Store, other)
				if err != nil {
					return nil, err
				}
				if c.Decision == journal.Execute {
					s.stolen <- c
					break
				}
				time.Sleep(time.Millisecond) // the hold has not ended yet
			}
		}
	}
	return s.Store.Claim(ctx, reqs)
}

// A worker whose retry finds its operation claimed by another owner hands
// the command off (the hand-off): it must not wait for its own delivery to
// settle — the delivery it would wait for is itself. Before the fix the
// command was parked behind its own key and kept alive by heartbeats for
// ever: every row final, the command never answered. Now it goes back to
// JetStream until the other owner's lease ends, and is answered from the
// journal with the other owner's result; the target saw the one call that
// failed and nothing more from this worker.
func TestAHandedOffCommandDoesNotWaitForItself(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const key = "test:payment.charge:evt-handoff:v1"
	store := &stealingStore{Store: b.store, key: key, stolen: make(chan journal.Claim, 1)}
	b.store = store
	b.target.mu.Lock()
	b.target.faults = append(b.target.faults, func(operation.Operation) error {
		return &adapters.Error{Code: adapters.CodeHTTP503, Class: adapters.Retry}
	})
	b.target.mu.Unlock()
	b.worker(t, "w1", worker.Config{Retry: worker.RetryPolicy{InitialDelay: 300 * time.Millisecond,
		MaxDelay: 300 * time.Millisecond, InLease: 3500 * time.Millisecond, MaxElapsed: time.Hour}, CallTimeout: time.Second})

	b.publish(t, charge("evt-handoff", "o-handoff", 100))
	var other journal.Claim
	select {
	case other = <-store.stolen:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never re-claimed the operation after its failed attempt")
	}
	// The other owner calls the target (its own effect) and completes.
	out, err := b.target.Execute(context.Background(), operation.Operation{Key: mustKey(t, key)})
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(context.Background(), b.store, journal.Completion{Key: key, Token: other.Token,
		Status: journal.StatusSucceeded, TargetObjectID: out.ObjectID, Result: []byte(`{"object_id":"` + out.ObjectID + `"}`)}))

	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
	require.Equal(t, out.ObjectID, r.TargetObjectID, "answered with the other owner's object")
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 2, calls, "the failed call and the other owner's; none more")
}

func mustKey(t *testing.T, s string) operation.Key {
	t.Helper()
	k, err := operation.ParseKey(s)
	require.NoError(t, err)
	return k
}
