package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

// TestResolveWinsAndTraceKeepsTheHistory: an unknown operation that three
// lookup rounds could not settle was raised for review and is held between
// rounds; `idemgate resolve` takes it over anyway, and `idemgate trace`
// (text and --json) still shows the rounds it had and when it was raised.
// A live execute is refused unless --force.
func TestResolveWinsAndTraceKeepsTheHistory(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, postgres.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	claim := func(key, owner string, ttl time.Duration) journal.Claim {
		c, err := journal.ClaimOne(ctx, st, journal.ClaimRequest{Key: key, OperationType: "crm.task.create", RequestHash: "h",
			TargetSystem: "crm", EventID: "evt", Owner: owner, LeaseTTL: ttl})
		require.NoError(t, err)
		return c
	}
	const key = "test:crm.task.create:evt-history:v1"
	c := claim(key, "w1", time.Minute)
	require.NoError(t, journal.CompleteOne(ctx, st, journal.Completion{Key: key, Token: c.Token, Status: journal.StatusUnknown,
		ErrorCode: "timeout_after_request_sent"}))
	for round := range 3 {
		c = claim(key, "reconciler", time.Minute)
		require.Equal(t, journal.Reconcile, c.Decision)
		hold := time.Duration(0)
		if round == 2 {
			hold = time.Hour // held until the next lookup round
		}
		require.NoError(t, journal.CompleteOne(ctx, st, journal.Completion{Key: key, Token: c.Token, Status: journal.StatusUnknown,
			Reconciled: true, ErrorCode: "timeout_after_request_sent", HoldFor: hold}))
	}
	raised, err := st.RaiseForReview(ctx, []string{key})
	require.NoError(t, err)
	require.Equal(t, []string{key}, raised)

	args := func(a ...string) []string {
		return append(a, "--journal-url", dsn, "--env", "test", "--nats-url", "nats://127.0.0.1:1")
	}
	var out, errb bytes.Buffer
	require.Equal(t, exitOK, run(ctx, args("resolve", key, "--as", "succeeded", "--object", "task-42",
		"--evidence", "task 42 found in the portal", "--operator", "alice"), &out, &errb), errb.String())
	require.Contains(t, out.String(), key+" resolved as succeeded by alice")
	require.Contains(t, out.String(), "result not published", "no NATS here: the next delivery replays it")

	out.Reset()
	require.Equal(t, exitOK, run(ctx, args("trace", key), &out, &errb), errb.String())
	require.Regexp(t, `(?m)^status\s+succeeded$`, out.String())
	require.Contains(t, out.String(), "reconcile rounds 0 (3 in all)")
	require.Contains(t, out.String(), "review     raised for an operator at ")
	require.Regexp(t, `(?m)^\d+\s+operator\s+alice\s.*succeeded\s.*task 42 found in the portal$`, out.String())

	out.Reset()
	require.Equal(t, exitOK, run(ctx, args("trace", key, "--json"), &out, &errb), errb.String())
	var tr struct {
		Operation struct {
			ReconcileRounds      int        `json:"reconcile_rounds"`
			ReconcileRoundsTotal int        `json:"reconcile_rounds_total"`
			RaisedAt             *time.Time `json:"raised_at"`
			EffectPossible       bool       `json:"effect_possible"`
		} `json:"operation"`
		Attempts []struct {
			Outcome journal.AttemptOutcome `json:"outcome"`
		} `json:"attempts"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &tr), out.String())
	require.Equal(t, 3, tr.Operation.ReconcileRoundsTotal, out.String())
	require.Zero(t, tr.Operation.ReconcileRounds)
	require.NotNil(t, tr.Operation.RaisedAt)
	require.True(t, tr.Operation.EffectPossible)
	require.NotEmpty(t, tr.Attempts)
	for _, a := range tr.Attempts {
		require.True(t, a.Outcome.Valid(), "every attempt is closed: %+v", a)
	}

	// A live execute: refused, then forced.
	const live = "test:crm.task.create:evt-live:v1"
	claim(live, "w1", time.Hour)
	out.Reset()
	errb.Reset()
	require.Equal(t, 1, run(ctx, args("resolve", live, "--as", "failed_final", "--evidence", "cancelled", "--operator", "bob"), &out, &errb))
	require.Contains(t, errb.String(), "w1 is executing it")
	out.Reset()
	require.Equal(t, exitOK, run(ctx, args("resolve", live, "--as", "failed_final", "--evidence", "cancelled", "--operator", "bob", "--force"), &out, &errb), errb.String())
	require.Contains(t, out.String(), live+" resolved as failed_final by bob")
}

// TestTracePrintsAttemptTraceIDs: `idemgate trace KEY` names the trace of
// each attempt the daemon recorded one for (tracing on), and "-" for the
// others; --json carries them by lease token.
func TestTracePrintsAttemptTraceIDs(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, postgres.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	const key = "test:crm.task.create:evt-traced:v1"
	c, err := journal.ClaimOne(ctx, st, journal.ClaimRequest{Key: key, OperationType: "crm.task.create", RequestHash: "h",
		TargetSystem: "crm", EventID: "evt-traced", Owner: "w1", LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(ctx, st, journal.Completion{Key: key, Token: c.Token, Status: journal.StatusUnknown,
		ErrorCode: "timeout_after_request_sent"}))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	require.NoError(t, st.SetAttemptTrace(ctx, key, c.Token, traceID))
	c2, err := journal.ClaimOne(ctx, st, journal.ClaimRequest{Key: key, OperationType: "crm.task.create", RequestHash: "h",
		TargetSystem: "crm", EventID: "evt-traced", Owner: "reconciler", LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, journal.Reconcile, c2.Decision)

	args := func(a ...string) []string { return append(a, "--journal-url", dsn, "--env", "test") }
	var out, errb bytes.Buffer
	require.Equal(t, exitOK, run(ctx, args("trace", key), &out, &errb), errb.String())
	require.Regexp(t, `(?m)^#\s+KIND\s.*\sTRACE\s+NOTE$`, out.String())
	require.Regexp(t, `(?m)^1\s+execute\s+w1\s.*\s`+traceID+`\s`, out.String())
	require.Regexp(t, `(?m)^1\s+reconcile\s+reconciler\s.*\s-\s+-$`, out.String(), "no trace recorded for it")

	out.Reset()
	require.Equal(t, exitOK, run(ctx, args("trace", key, "--json"), &out, &errb), errb.String())
	var tr struct {
		Traces map[string]string `json:"attempt_trace_ids"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &tr), out.String())
	require.Equal(t, map[string]string{strconv.FormatInt(c.Token, 10): traceID}, tr.Traces)
}
