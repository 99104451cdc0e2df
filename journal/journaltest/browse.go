package journaltest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// ExerciseBrowser is the conformance suite of journal.Browser, the reads of
// the operator's console: every filter, keyset pages that neither skip nor
// repeat a row, an intent's keys across operation types, and the counts of
// the overview. newStore must return a fresh, empty store that implements
// journal.Browser.
func ExerciseBrowser(t *testing.T, newStore NewStore) {
	s := newStore(t)
	b, ok := s.(journal.Browser)
	require.True(t, ok, "%T does not implement journal.Browser", s)
	c := ctx(t)

	// 25 operations: intents i-00..i-24, two types, every third succeeded
	// with an object, every fifth unknown, one held by a live lease.
	var keys []string
	for i := range 25 {
		typ := "crm.task.create"
		if i%2 == 1 {
			typ = "payment.charge"
		}
		k := fmt.Sprintf("test:%s:i-%02d:v1", typ, i)
		keys = append(keys, k)
		cl := claim(t, s, journal.ClaimRequest{Key: k, OperationType: typ, RequestHash: hashA, TargetSystem: "sb",
			EventID: fmt.Sprintf("evt-%02d", i), Owner: owner, LeaseTTL: time.Minute})
		require.Equal(t, journal.Execute, cl.Decision)
		switch {
		case i == 24:
			// left started, its lease live
		case i%3 == 0:
			require.NoError(t, journal.CompleteOne(c, s, journal.Completion{Key: k, Token: cl.Token, Status: journal.StatusSucceeded,
				TargetObjectID: fmt.Sprintf("obj-%02d", i), Result: json.RawMessage(`{"id":"x"}`)}))
		case i%5 == 0:
			require.NoError(t, journal.CompleteOne(c, s, journal.Completion{Key: k, Token: cl.Token, Status: journal.StatusUnknown, ErrorCode: "timeout"}))
		default:
			require.NoError(t, journal.CompleteOne(c, s, journal.Completion{Key: k, Token: cl.Token, Status: journal.StatusFailedFinal, ErrorCode: "rejected"}))
		}
		// Distinct creation times on a millisecond clock.
		time.Sleep(2 * time.Millisecond)
	}
	// A key of intent i-07 under another version, and one whose intent
	// merely starts like it: only the first is i-07's.
	for _, k := range []string{"test:crm.task.create:i-07:v2", "test:crm.task.create:i-07:v2x:v1"} {
		cl := claim(t, s, journal.ClaimRequest{Key: k, OperationType: "crm.task.create", RequestHash: hashA, TargetSystem: "sb", Owner: owner, LeaseTTL: time.Minute})
		require.NoError(t, journal.CompleteOne(c, s, journal.Completion{Key: k, Token: cl.Token, Status: journal.StatusFailedFinal, ErrorCode: "x"}))
	}

	search := func(q journal.SearchQuery) []string {
		t.Helper()
		if q.Limit == 0 {
			q.Limit = 100
		}
		recs, err := b.Search(c, q)
		require.NoError(t, err)
		out := []string{}
		for _, r := range recs {
			out = append(out, r.Key)
		}
		return out
	}

	t.Run("pages", func(t *testing.T) {
		all := search(journal.SearchQuery{})
		require.Len(t, all, 27)
		// Newest first.
		require.Equal(t, "test:crm.task.create:i-07:v2x:v1", all[0])
		require.Equal(t, keys[0], all[26])
		var paged []string
		var after *journal.Cursor
		for range 10 {
			recs, err := b.Search(c, journal.SearchQuery{Limit: 4, After: after})
			require.NoError(t, err)
			if len(recs) == 0 {
				break
			}
			for _, r := range recs {
				paged = append(paged, r.Key)
			}
			cur := journal.CursorOf(recs[len(recs)-1])
			after = &cur
		}
		require.Equal(t, all, paged, "pages neither skip nor repeat a row")
	})
	t.Run("filters", func(t *testing.T) {
		require.Equal(t, []string{keys[9]}, search(journal.SearchQuery{Key: keys[9]}))
		require.Equal(t, []string{keys[11]}, search(journal.SearchQuery{EventID: "evt-11"}))
		require.Equal(t, []string{keys[12]}, search(journal.SearchQuery{TargetObjectID: "obj-12"}))
		require.Empty(t, search(journal.SearchQuery{TargetObjectID: "obj-13"}))
		require.Equal(t, []string{keys[20], keys[10], keys[5]}, search(journal.SearchQuery{Status: journal.StatusUnknown}))
		require.Equal(t, []string{keys[24]}, search(journal.SearchQuery{Status: journal.StatusStarted}))
		require.Equal(t, []string{keys[21], keys[15], keys[9], keys[3]},
			search(journal.SearchQuery{Status: journal.StatusSucceeded, OperationType: "payment.charge"}))
		require.Len(t, search(journal.SearchQuery{OperationType: "payment.charge"}), 12)
		require.Equal(t, []string{"test:crm.task.create:i-07:v2", keys[7]}[1:],
			search(journal.SearchQuery{IntentID: "i-07", Env: "test", OperationType: "payment.charge"}))
		require.Equal(t, []string{"test:crm.task.create:i-07:v2", keys[7]},
			search(journal.SearchQuery{IntentID: "i-07", Env: "test", Types: []string{"crm.task.create", "payment.charge"}}))
		require.Empty(t, search(journal.SearchQuery{IntentID: "i-07", Env: "prod", Types: []string{"crm.task.create", "payment.charge"}}))
	})
	t.Run("time range", func(t *testing.T) {
		one, err := s.Get(c, keys[10])
		require.NoError(t, err)
		from := one.CreatedAt
		last, err := s.Get(c, keys[14])
		require.NoError(t, err)
		require.Equal(t, []string{keys[13], keys[12], keys[11], keys[10]},
			search(journal.SearchQuery{From: from, To: last.CreatedAt}))
	})
	t.Run("bad queries", func(t *testing.T) {
		for _, q := range []journal.SearchQuery{
			{Limit: 0}, {Limit: journal.MaxSearchLimit + 1}, {Limit: 5, Status: "lost"},
			{Limit: 5, IntentID: "x", Types: []string{"a"}}, {Limit: 5, IntentID: "x", Env: "test"},
			{Limit: 5, From: time.Unix(10, 0), To: time.Unix(5, 0)},
		} {
			_, err := b.Search(c, q)
			require.ErrorIs(t, err, journal.ErrInvalid, "%+v", q)
		}
	})
	t.Run("counts", func(t *testing.T) {
		counts, err := b.StatusCounts(c)
		require.NoError(t, err)
		got := map[string]int64{}
		for _, sc := range counts {
			got[string(sc.Status)+"/"+sc.OperationType] = sc.Count
		}
		require.Equal(t, map[string]int64{
			"succeeded/crm.task.create": 4, "succeeded/payment.charge": 4,
			"unknown/crm.task.create": 2, "unknown/payment.charge": 1,
			"failed_final/crm.task.create": 8, "failed_final/payment.charge": 7,
			"started/crm.task.create": 1,
		}, got)
		atts, err := b.AttemptCounts(c, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		byOutcome := map[journal.AttemptOutcome]int64{}
		for _, a := range atts {
			require.Equal(t, journal.KindExecute, a.Kind)
			byOutcome[a.Outcome] += a.Count
		}
		require.Equal(t, map[journal.AttemptOutcome]int64{journal.OutcomeSucceeded: 8, journal.OutcomeUnknown: 3, journal.OutcomeFailedFinal: 15}, byOutcome)
		later, err := b.AttemptCounts(c, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Empty(t, later)
		holders, err := b.LeaseHolders(c)
		require.NoError(t, err)
		require.Len(t, holders, 1)
		require.Equal(t, owner, holders[0].Owner)
		require.Equal(t, int64(1), holders[0].Leases)
		require.False(t, holders[0].Until.IsZero())
	})
}
