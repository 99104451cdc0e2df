package sqljournal

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// TestSearchPicksTheKindAndItsArguments checks the choice both engines make:
// which statement serves a search, and the arguments in the order the
// statements number them.
func TestSearchPicksTheKindAndItsArguments(t *testing.T) {
	from, to := time.Unix(100, 0), time.Unix(200, 0)
	at := func(t time.Time) any { return t.Unix() }
	ranges := func(rs []journal.IntentRange) []any {
		out := make([]any, 0, len(rs))
		for _, r := range rs {
			out = append(out, r.Lo+".."+r.Hi)
		}
		return out
	}
	cursor := &journal.Cursor{CreatedAt: time.Unix(150, 0), Key: "k9"}
	for _, tc := range []struct {
		name string
		q    journal.SearchQuery
		kind SearchKind
		args []any
	}{
		{"all", journal.SearchQuery{Limit: 5}, SearchAll, []any{nil, nil, nil, nil, nil, nil, 5}},
		{"final status along the time index", journal.SearchQuery{Limit: 5, Status: journal.StatusSucceeded},
			SearchAll, []any{"succeeded", nil, nil, nil, nil, nil, 5}},
		{"open status", journal.SearchQuery{Limit: 5, Status: journal.StatusUnknown, OperationType: "crm.task.create"},
			SearchOpen, []any{"unknown", "crm.task.create", nil, nil, nil, nil, 5, "unknown"}},
		{"key before the rest", journal.SearchQuery{Limit: 5, Key: "k1", EventID: "e1", From: from, To: to},
			SearchKey, []any{nil, nil, int64(100), int64(200), nil, nil, 5, "k1"}},
		{"event", journal.SearchQuery{Limit: 5, EventID: "e1", After: cursor},
			SearchEvent, []any{nil, nil, nil, nil, int64(150), "k9", 5, "e1"}},
		{"object", journal.SearchQuery{Limit: 5, TargetObjectID: "o1"}, SearchObject, []any{nil, nil, nil, nil, nil, nil, 5, "o1"}},
		{"intent", journal.SearchQuery{Limit: 5, IntentID: "i1", Env: "test", Types: []string{"a", "b"}},
			SearchIntent, []any{nil, nil, nil, nil, nil, nil, 5, "test:a:i1:v..test:a:i1:w", "test:b:i1:v..test:b:i1:w"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.q.Validate(); err != nil {
				t.Fatalf("invalid query: %v", err)
			}
			kind, args := Search(tc.q, at, ranges)
			if kind != tc.kind {
				t.Errorf("kind %d, want %d", kind, tc.kind)
			}
			if len(args) != len(tc.args) {
				t.Fatalf("args %v, want %v", args, tc.args)
			}
			for i := range args {
				if args[i] != tc.args[i] {
					t.Errorf("arg %d: %#v, want %#v", i+1, args[i], tc.args[i])
				}
			}
		})
	}
}
