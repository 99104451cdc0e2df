package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/worker"
)

// TestConflictCarriesTheFirstOutcome: a charge's key reused with another
// amount is answered conflict with the first request's outcome — succeeded,
// its payment — and a reason that says the money moved and that a changed
// charge is a separate payment a person approves. Nothing more is charged.
func TestConflictCarriesTheFirstOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sb, a := startYooKassa(t)
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second, Retry: worker.RetryPolicy{InLease: 2 * time.Second}},
		map[string]adapters.Adapter{"payment.charge": a})
	const key = "test:payment.charge:pay-conflict:v1"
	b.publishCommand(t, chargeCommand("evt-pc-1", "pay-conflict"))
	first := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, first.Status, "%+v", first)
	require.NotEmpty(t, first.TargetObjectID)

	changed := chargeCommand("evt-pc-2", "pay-conflict")
	changed.Payload = json.RawMessage(`{"account_id":"merchant-account-17","order_id":"pay-conflict","amount_minor":990000,"currency":"rub"}`)
	b.publishCommand(t, changed)
	r := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultConflict, r.Status, "%+v", r)
	require.Equal(t, &operation.Existing{Status: operation.ResultSucceeded, TargetObjectID: first.TargetObjectID}, r.Existing)
	require.Empty(t, r.TargetObjectID, "the conflicting command made nothing")
	require.Contains(t, r.Reason, "amount_minor differs from the first request for this intent, so nothing was executed for this one.")
	require.Contains(t, r.Reason, "The first request succeeded: the payment provider holds object "+first.TargetObjectID+", and that money has moved.")
	require.Contains(t, r.Reason, "a separate, additional payment, sent as a new intent")
	require.Equal(t, 1, sb.TotalEffects())
}

// TestReplayedAnswersSayReplayedOnce: the target's own replay is
// result.target_replayed, never a second "replayed" beside the envelope's —
// in a first answer, in a replay, and in the replay of a result stored
// under the old name.
func TestReplayedAnswersSayReplayedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, a := startBitrix24(t, 2*time.Second)
	b.workerFor(t, "w1", worker.Config{LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second, Retry: worker.RetryPolicy{InLease: 2 * time.Second}},
		map[string]adapters.Adapter{"crm.task.create": a})
	members := func(r operation.Result) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(r.Result, &m), "%s", r.Result)
		return m
	}

	const key = "test:crm.task.create:task-once:v1"
	b.publishCommand(t, taskCommand("evt-once-1", "task-once"))
	first := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, first.Status, "%+v", first)
	require.False(t, first.Replayed)
	require.Equal(t, false, members(first)["target_replayed"], "%s", first.Result)
	require.NotContains(t, members(first), "replayed")

	b.publishCommand(t, taskCommand("evt-once-2", "task-once"))
	again := b.await(t, key, 1)[0]
	require.True(t, again.Replayed)
	require.NotContains(t, members(again), "replayed", "%s", again.Result)
	require.Contains(t, members(again), "target_replayed")

	// A row completed before the member had its name.
	ctx := context.Background()
	cmd := taskCommand("evt-old-1", "task-old")
	op, err := (&operation.Decoder{Env: "test"}).DecodeCommand(cmd)
	require.NoError(t, err)
	c, err := journal.ClaimOne(ctx, b.store, journal.ClaimRequest{Key: op.Key.String(), OperationType: op.Type, RequestHash: op.Fingerprint,
		TargetSystem: op.TargetSystem, EventID: op.EventID, Owner: "before", LeaseTTL: time.Minute, FieldDigests: op.FieldDigests()})
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(ctx, b.store, journal.Completion{Key: op.Key.String(), Token: c.Token, Status: journal.StatusSucceeded,
		TargetObjectID: "77", Result: json.RawMessage(`{"business_status":"open","entity":"task","replayed":false}`)}))
	b.publishCommand(t, cmd)
	old := b.await(t, op.Key.String(), 1)[0]
	require.True(t, old.Replayed)
	require.Equal(t, "77", old.TargetObjectID)
	require.Equal(t, map[string]any{"business_status": "open", "entity": "task", "target_replayed": false}, members(old))
}
