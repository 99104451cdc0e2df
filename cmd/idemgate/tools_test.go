package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// TestTraceJSONIsSnakeCaseWithNulls: trace --json names every member in
// snake_case and gives null, not a zero value, for what is absent: the
// lease and completion of a finished operation, the end and outcome of a
// running attempt.
func TestTraceJSONIsSnakeCaseWithNulls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := testDefaults()
	c.Env = "test"
	c.DataDir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, _, err := openJournal(ctx, c, quietLog(), createJournal)
	require.NoError(t, err)
	defer st.Close()
	const key = "test:payment.charge:evt-json:v1"
	claim, err := journal.ClaimOne(ctx, st, journal.ClaimRequest{Key: key, OperationType: "payment.charge",
		RequestHash: "h1", TargetSystem: "payments", EventID: "evt-json", Owner: "w-json", LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, journal.Execute, claim.Decision)

	trace := func() map[string]any {
		t.Helper()
		var out, errb bytes.Buffer
		require.Equal(t, exitOK, run(ctx, []string{"trace", "--data-dir", dir, "--env", "test", key, "--json"}, &out, &errb), errb.String())
		var doc map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc), out.String())
		snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, e := range v {
					require.Regexp(t, snake, k, "member names are snake_case")
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		walk(doc)
		return doc
	}

	running := trace()
	op := running["operation"].(map[string]any)
	require.Equal(t, key, op["key"])
	require.Equal(t, "started", op["status"])
	require.Equal(t, "w-json", op["lease_owner"])
	require.NotNil(t, op["lease_until"])
	require.Nil(t, op["completed_at"], "not completed yet: null")
	require.Nil(t, op["target_object_id"])
	atts := running["attempts"].([]any)
	require.Len(t, atts, 1)
	att := atts[0].(map[string]any)
	require.Nil(t, att["finished_at"], "a running attempt has no end")
	require.Nil(t, att["outcome"])
	require.NotNil(t, att["started_at"])

	require.NoError(t, journal.CompleteOne(ctx, st, journal.Completion{Key: key, Token: claim.Token,
		Status: journal.StatusSucceeded, TargetObjectID: "pay-1", Result: json.RawMessage(`{"business_status":"succeeded"}`)}))
	done := trace()
	op = done["operation"].(map[string]any)
	require.Equal(t, "succeeded", op["status"])
	require.Equal(t, "pay-1", op["target_object_id"])
	require.Equal(t, map[string]any{"business_status": "succeeded"}, op["result"])
	require.NotNil(t, op["completed_at"])
	require.Nil(t, op["lease_until"], "a finished operation holds no lease: null")
	att = done["attempts"].([]any)[0].(map[string]any)
	require.Equal(t, "succeeded", att["outcome"])
	require.NotNil(t, att["finished_at"])
}

func TestSnakeCase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Key": "key", "TargetObjectID": "target_object_id", "LeaseTTL": "lease_ttl", "HTTPStatus": "http_status",
		"ReconcileRounds": "reconcile_rounds", "EventID": "event_id", "Attempt2Count": "attempt2_count",
	} {
		require.Equal(t, want, snakeCase(in), in)
	}
}
