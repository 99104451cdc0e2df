package worker_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/worker"
)

// TestConflictNamesTheFieldsThatDiffer: the conflict result says which
// significant fields differ from the key's first request, from digests the
// journal keeps beside the fingerprint — never the values.
func TestConflictNamesTheFieldsThatDiffer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(t, "w1", worker.Config{})
	const key = "test:payment.charge:evt-cf:v1"
	b.publish(t, charge("evt-cf", "order-1", 100))
	require.Equal(t, operation.ResultSucceeded, b.await(t, key, 1)[0].Status)

	b.publish(t, charge("evt-cf", "order-2", 999))
	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultConflict, r.Status)
	require.Equal(t, []string{"amount_minor", "order_id"}, r.ConflictFields)
	require.Contains(t, r.Reason, "amount_minor and order_id differ")
	require.NotContains(t, r.Reason, "order-2")

	stored, err := b.store.FieldDigests(context.Background(), key)
	require.NoError(t, err)
	require.Contains(t, stored, `"amount_minor":"`)
	for _, value := range []string{"order-1", "merchant-account-17", "100", "RUB"} {
		require.NotContains(t, stored, value, "the journal keeps digests, never values")
	}
	effects, calls := b.target.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, calls, "a conflict calls nothing")
}
