package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
)

// TestTraceJSONContract: trace --json's output, byte for byte, for rows
// with every field set and with none: snake_case members in the journal's
// field order, null for an empty string, a zero time or no result, times in
// UTC to the nanosecond, [] for an empty list. (The reflective encoder this
// replaced printed exactly these bytes.)
func TestTraceJSONContract(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 10, 11, 12, 345678900, time.FixedZone("MSK", 3*3600))
	rec := journal.Record{Key: "test:payment.charge:evt-1:v1", OperationType: "payment.charge", RequestHash: "h1", Status: journal.StatusSucceeded,
		TargetSystem: "payments", TargetObjectID: "pay-1", Result: json.RawMessage(`{"business_status":"succeeded"}`), ErrorCode: "e",
		AttemptCount: 2, EventID: "evt-1", ApprovalID: "appr-1", LeaseOwner: "w-1", LeaseToken: 7, LeaseUntil: at, ReconcileRounds: 1,
		ReconcileRoundsTotal: 3, RaisedAt: at.Add(time.Second), EffectPossible: true, CreatedAt: at, UpdatedAt: at.Add(2 * time.Second), CompletedAt: at.Add(3 * time.Second)}
	att := journal.Attempt{Key: "k", Attempt: 1, Token: 7, Worker: "w", Kind: "execute", StartedAt: at, FinishedAt: at, Outcome: "succeeded",
		ErrorCode: "x", TargetRequestID: "r", Note: "n"}
	pr := journal.ProcessRecord{Key: "p", Name: "n", RequestHash: "h", Digest: "d", Status: "running", Step: -1, FailedStep: "f", ErrorCode: "e",
		EventID: "ev", ApprovalID: "a", LeaseOwner: "o", LeaseToken: 3, LeaseUntil: at, CreatedAt: at, UpdatedAt: at, CompletedAt: at}
	for name, tc := range map[string]struct {
		doc  any
		want string
	}{
		"operation, every field set": {traceJSON{Operation: operationOf(rec),
			Answer: answerOf(answer.Answer{Status: "succeeded", NextAction: answer.Done, Reason: "the target holds the object"}), Attempts: each([]journal.Attempt{att, {}}, attemptOf),
			AttemptTraceIDs: map[int64]string{7: "abc"}}, `{"operation":{"key":"test:payment.charge:evt-1:v1","operation_type":"payment.charge","request_hash":"h1","status":"succeeded","target_system":"payments","target_object_id":"pay-1","result":{"business_status":"succeeded"},"error_code":"e","attempt_count":2,"event_id":"evt-1","approval_id":"appr-1","lease_owner":"w-1","lease_token":7,"lease_until":"2026-12-04T07:11:12.3456789Z","reconcile_rounds":1,"reconcile_rounds_total":3,"raised_at":"2026-12-04T07:11:13.3456789Z","effect_possible":true,"created_at":"2026-12-04T07:11:12.3456789Z","updated_at":"2026-12-04T07:11:14.3456789Z","completed_at":"2026-12-04T07:11:15.3456789Z"},"answer":{"status":"succeeded","next_action":"done","reason":"the target holds the object"},"attempts":[{"key":"k","attempt":1,"token":7,"worker":"w","kind":"execute","started_at":"2026-12-04T07:11:12.3456789Z","finished_at":"2026-12-04T07:11:12.3456789Z","outcome":"succeeded","error_code":"x","target_request_id":"r","note":"n"},{"key":null,"attempt":0,"token":0,"worker":null,"kind":null,"started_at":null,"finished_at":null,"outcome":null,"error_code":null,"target_request_id":null,"note":null}],"attempt_trace_ids":{"7":"abc"},"approval":null}`},
		"operation, nothing set": {traceJSON{Operation: operationOf(journal.Record{}), Attempts: each([]journal.Attempt(nil), attemptOf)}, `{"operation":{"key":null,"operation_type":null,"request_hash":null,"status":null,"target_system":null,"target_object_id":null,"result":null,"error_code":null,"attempt_count":0,"event_id":null,"approval_id":null,"lease_owner":null,"lease_token":0,"lease_until":null,"reconcile_rounds":0,"reconcile_rounds_total":0,"raised_at":null,"effect_possible":false,"created_at":null,"updated_at":null,"completed_at":null},"answer":{"status":"","next_action":"","reason":""},"attempts":[],"attempt_trace_ids":null,"approval":null}`},
		"unresolved": {unresolvedJSON{Unknown: each([]journal.Record{rec}, operationOf), IdleRetry: each([]journal.Record(nil), operationOf),
			ProcessesNeedsReview: each([]journal.ProcessRecord{pr, {}}, processOf)}, `{"unknown":[{"key":"test:payment.charge:evt-1:v1","operation_type":"payment.charge","request_hash":"h1","status":"succeeded","target_system":"payments","target_object_id":"pay-1","result":{"business_status":"succeeded"},"error_code":"e","attempt_count":2,"event_id":"evt-1","approval_id":"appr-1","lease_owner":"w-1","lease_token":7,"lease_until":"2026-12-04T07:11:12.3456789Z","reconcile_rounds":1,"reconcile_rounds_total":3,"raised_at":"2026-12-04T07:11:13.3456789Z","effect_possible":true,"created_at":"2026-12-04T07:11:12.3456789Z","updated_at":"2026-12-04T07:11:14.3456789Z","completed_at":"2026-12-04T07:11:15.3456789Z"}],"idle_retry":[],"processes_needs_review":[{"key":"p","name":"n","request_hash":"h","digest":"d","status":"running","step":-1,"failed_step":"f","error_code":"e","event_id":"ev","approval_id":"a","lease_owner":"o","lease_token":3,"lease_until":"2026-12-04T07:11:12.3456789Z","created_at":"2026-12-04T07:11:12.3456789Z","updated_at":"2026-12-04T07:11:12.3456789Z","completed_at":"2026-12-04T07:11:12.3456789Z","resolved_by":null,"resolved_at":null,"resolution_evidence":null},{"key":null,"name":null,"request_hash":null,"digest":null,"status":null,"step":0,"failed_step":null,"error_code":null,"event_id":null,"approval_id":null,"lease_owner":null,"lease_token":0,"lease_until":null,"created_at":null,"updated_at":null,"completed_at":null,"resolved_by":null,"resolved_at":null,"resolution_evidence":null}]}`},
		"operation with its approval": {traceJSON{Operation: operationOf(journal.Record{}), Attempts: each([]journal.Attempt(nil), attemptOf),
			Approval: approvalOf(&journal.Approval{Key: "k", OperationType: "payment.charge", RequestHash: "h1", TargetSystem: "payments", EventID: "evt-1",
				RequestedBy: "agent:bot", Display: json.RawMessage(`{"amount_minor":100}`), Approvers: 1, State: journal.ApprovalApproved,
				RequestedAt: at, ExpiresAt: at, DecidedAt: at, Votes: []journal.ApprovalVote{{Approver: "alice", Vote: journal.VoteApprove,
					Reason: "paid", RequestHash: "h1", At: at}}})},
			`{"operation":{"key":null,"operation_type":null,"request_hash":null,"status":null,"target_system":null,"target_object_id":null,"result":null,"error_code":null,"attempt_count":0,"event_id":null,"approval_id":null,"lease_owner":null,"lease_token":0,"lease_until":null,"reconcile_rounds":0,"reconcile_rounds_total":0,"raised_at":null,"effect_possible":false,"created_at":null,"updated_at":null,"completed_at":null},"answer":{"status":"","next_action":"","reason":""},"attempts":[],"attempt_trace_ids":null,"approval":{"key":"k","operation_type":"payment.charge","request_hash":"h1","target_system":"payments","event_id":"evt-1","requested_by":"agent:bot","display":{"amount_minor":100},"approvers":1,"state":"approved","requested_at":"2026-12-04T07:11:12.3456789Z","expires_at":"2026-12-04T07:11:12.3456789Z","decided_at":"2026-12-04T07:11:12.3456789Z","released_at":null,"votes":[{"approver":"alice","vote":"approve","reason":"paid","request_hash":"h1","at":"2026-12-04T07:11:12.3456789Z","token_id":null}]}}`},
		"process": {processTraceJSON{Process: processOf(pr)}, `{"process":{"key":"p","name":"n","request_hash":"h","digest":"d","status":"running","step":-1,"failed_step":"f","error_code":"e","event_id":"ev","approval_id":"a","lease_owner":"o","lease_token":3,"lease_until":"2026-12-04T07:11:12.3456789Z","created_at":"2026-12-04T07:11:12.3456789Z","updated_at":"2026-12-04T07:11:12.3456789Z","completed_at":"2026-12-04T07:11:12.3456789Z","resolved_by":null,"resolved_at":null,"resolution_evidence":null},"steps":null,"timeline":null}`},
	} {
		var b bytes.Buffer
		require.NoError(t, writeJSON(&b, tc.doc))
		require.Equal(t, tc.want+"\n", b.String(), name)
	}
}

// TestTraceJSONShowsEveryJournalField: each JSON type has one member per
// exported field of its journal type, named in snake_case, in the same
// order: a field added to the journal fails here until trace --json shows
// it (or this test says why not).
func TestTraceJSONShowsEveryJournalField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ journal, json reflect.Type }{
		{reflect.TypeFor[journal.Record](), reflect.TypeFor[operationJSON]()},
		{reflect.TypeFor[journal.Attempt](), reflect.TypeFor[attemptJSON]()},
		{reflect.TypeFor[journal.ProcessRecord](), reflect.TypeFor[processJSON]()},
		{reflect.TypeFor[journal.Approval](), reflect.TypeFor[approvalJSON]()},
		{reflect.TypeFor[journal.ApprovalVote](), reflect.TypeFor[approvalVote]()},
	} {
		var want, have []string
		for i := range tc.journal.NumField() {
			if f := tc.journal.Field(i); f.IsExported() {
				want = append(want, snakeCase(f.Name))
			}
		}
		for i := range tc.json.NumField() {
			tag, _, _ := strings.Cut(tc.json.Field(i).Tag.Get("json"), ",")
			have = append(have, tag)
		}
		require.Equal(t, want, have, "%v as %v", tc.journal, tc.json)
	}
}

// TestUnresolvedJSONNamesTheKinds: trace --unresolved --json names its
// lists by the unresolved kinds, as the metric operations_unresolved{kind}
// and every face do.
func TestUnresolvedJSONNamesTheKinds(t *testing.T) {
	t.Parallel()
	ty := reflect.TypeFor[unresolvedJSON]()
	for field, kind := range map[string]answer.Kind{"Unknown": answer.KindUnknown, "IdleRetry": answer.KindIdleRetry} {
		f, ok := ty.FieldByName(field)
		require.True(t, ok, field)
		require.Equal(t, string(kind), f.Tag.Get("json"))
	}
}

// snakeCase turns a Go field name into snake_case, keeping initialisms
// together: TargetObjectID → target_object_id, LeaseTTL → lease_ttl,
// HTTPStatus → http_status.
func snakeCase(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if i > 0 && (prevLower || (nextLower && unicode.IsUpper(r[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
