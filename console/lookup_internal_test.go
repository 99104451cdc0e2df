package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// TestCompareJudgesEveryAnswer: what each lookup answer says of each
// decision: agreeing, contradicting (recorded only over an override), or
// unable to tell (the operator's evidence stands).
func TestCompareJudgesEveryAnswer(t *testing.T) {
	found := Lookup{Status: LookupFound, ObjectID: "p-1"}
	dup := Lookup{Status: LookupFound, ObjectID: "p-1", Duplicates: []string{"p-2"}}
	declined := Lookup{Status: LookupFound, ObjectID: "p-1", Final: true, Code: "declined"}
	none := Lookup{Status: LookupNotFound, Note: "reconciled: not found by key"}
	unsure := Lookup{Status: LookupIndeterminate, Note: "lookup failed: http_503"}
	ok, fail := journal.StatusSucceeded, journal.StatusFailedFinal
	for name, tc := range map[string]struct {
		l           Lookup
		as          journal.Status
		object      string
		contradicts bool
		said        bool
		msg         string
	}{
		"the object":             {found, ok, "p-1", false, true, "Checked: the target holds p-1 for this key."},
		"the object, duplicated": {dup, ok, "p-1", false, true, "further object(s) for it ([p-2]): they need a person"},
		"a duplicate":            {dup, ok, "p-2", true, true, "so does the older p-1, which the operation keeps: resolve with p-1"},
		"another object":         {found, ok, "p-9", true, true, "The target holds p-1 for this key, not p-9."},
		"declined, said success": {declined, ok, "p-1", true, true, "final failure (declined)"},
		"none, said success":     {none, ok, "p-9", true, true, "holds no object for this key"},
		"unsure, said success":   {unsure, ok, "p-9", false, false, "could not tell (lookup failed: http_503)"},
		"object, said failure":   {found, fail, "", true, true, "holds p-1 for this key: the effect exists"},
		"declined, said failure": {declined, fail, "", false, true, "Checked: the target reports this key's attempt as a final failure (declined)."},
		"none, said failure":     {none, fail, "", false, true, "Checked: the target holds no object for this key"},
		"unsure, said failure":   {unsure, fail, "", false, false, "rests on your evidence"},
	} {
		ch := compare(tc.l, tc.as, tc.object)
		require.Equal(t, tc.contradicts, ch.Contradicts, name)
		require.Equal(t, tc.said, ch.Said, name)
		require.Contains(t, ch.Message, tc.msg, name)
	}
}

func TestRunsOfKeepsOrder(t *testing.T) {
	a := func(note string) journal.Attempt { return journal.Attempt{Kind: journal.KindReconcile, Note: note} }
	runs := runsOf([]journal.Attempt{a("x"), a("x"), a("y"), a("x")})
	require.Len(t, runs, 3)
	require.Equal(t, []int{2, 1, 1}, []int{runs[0].Count, runs[1].Count, runs[2].Count})
	require.Equal(t, "lookups", runs[0].Noun())
}
