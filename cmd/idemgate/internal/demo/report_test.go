package demo

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

func passing(name string) Row {
	r := Row{Scenario: name, Target: "yookassa", Sent: 3, Intents: 1, Effects: 1, Replays: 2}
	r.check("one effect per intent", true, "1 effect for 1 intent")
	return r
}

func TestVerdict(t *testing.T) {
	t.Parallel()
	failing := passing("payment: lost response reconciled")
	failing.check("unknown outcome looked up by key, never retried blindly", false, "2 calls to YooKassa, 0 reconciliations")
	noChecks := Row{Scenario: "ran, judged nothing", Target: "onec"}
	skipped := Row{Scenario: "invoice", Target: "onec", Skipped: "no adapter is routed for invoice.create"}

	cases := map[string]struct {
		rows   []Row
		pass   bool
		failed []string
	}{
		"all pass":             {rows: []Row{passing("a"), passing("b")}, pass: true},
		"pass beside a skip":   {rows: []Row{passing("a"), skipped}, pass: true},
		"one failed guarantee": {rows: []Row{passing("a"), failing}, failed: []string{"payment: lost response reconciled: unknown outcome looked up by key, never retried blindly"}},
		"row without checks":   {rows: []Row{passing("a"), noChecks}, failed: []string{"ran, judged nothing: no guarantee was judged"}},
		"nothing ran":          {rows: []Row{skipped}},
		"no rows":              {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep := Report{Rows: tc.rows}
			require.Equal(t, tc.pass, rep.Pass())
			require.Equal(t, tc.failed, rep.Failed())
			var out bytes.Buffer
			require.NoError(t, rep.WriteTable(&out))
			if tc.pass {
				require.Contains(t, out.String(), "RESULT: PASS")
				require.NotContains(t, out.String(), "FAIL")
			} else {
				require.Contains(t, out.String(), "RESULT: FAIL")
			}
		})
	}
}

func TestTableShowsTheFailingRow(t *testing.T) {
	t.Parallel()
	failing := passing("payment: lost response reconciled")
	failing.check("unknown outcome looked up by key, never retried blindly", false, "2 calls to YooKassa, 0 reconciliations")
	rep := Report{Rows: []Row{passing("payment: duplicates and retries"), failing}, Elapsed: 1500 * time.Millisecond}
	var out bytes.Buffer
	require.NoError(t, rep.WriteTable(&out))
	lines := strings.Split(out.String(), "\n")
	require.Regexp(t, `^SCENARIO\s+TARGET\s+SENT\s+INTENTS\s+EFFECTS\s+REPLAYS\s+CONFLICTS\s+RECONCILED\s+TIME\s+VERDICT$`, lines[0])
	require.Regexp(t, `^payment: duplicates and retries\s+yookassa\s+3\s+1\s+1\s+2\s+0\s+0\s+0s\s+PASS$`, lines[1])
	require.Regexp(t, `^payment: lost response reconciled\s+yookassa\s+3\s+1\s+1\s+2\s+0\s+0\s+0s\s+FAIL$`, lines[2])
	require.Contains(t, out.String(), "    FAIL  unknown outcome looked up by key, never retried blindly: 2 calls to YooKassa, 0 reconciliations")
	require.Contains(t, out.String(), "RESULT: FAIL — 2 of 3 guarantees held")
	require.Contains(t, out.String(), "(1.5s)")
}

func TestTableUnfinishedRow(t *testing.T) {
	t.Parallel()
	r := Row{Scenario: "two replicas racing", Target: "yookassa", Sent: 24, Intents: 8, Unfinished: true}
	r.check("finished", false, "20 of 24 results arrived: deadline")
	var out bytes.Buffer
	require.NoError(t, Report{Rows: []Row{r}}.WriteTable(&out))
	require.Regexp(t, `(?m)^two replicas racing\s+yookassa\s+24\s+8\s+\?\s+\?\s+\?\s+\?\s+0s\s+FAIL$`, out.String())
	require.Contains(t, out.String(), "FAIL  finished: 20 of 24 results arrived")
}

func TestWriteTableReportsWriteErrors(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, Report{Rows: []Row{passing("a")}}.WriteTable(failWriter{}), errBroken)
}

var errBroken = errors.New("broken pipe")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errBroken }

// TestJudgeEffects counts effects in a real emulator's ledger.
func TestJudgeEffects(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		keys    []string
		intents int
		pass    bool
		detail  string
	}{
		"one per intent":      {keys: []string{"k1", "k2"}, intents: 2, pass: true},
		"a key twice":         {keys: []string{"k1", "k1"}, intents: 2, detail: "k1 ×2"},
		"a missing effect":    {keys: []string{"k1"}, intents: 2, detail: "1 effects in the yookassa ledger for 2 intents"},
		"an effect too many":  {keys: []string{"k1", "k2", "k3"}, intents: 2, detail: "3 effects"},
		"nothing for nothing": {intents: 0, pass: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			y := sbyookassa.New(sbyookassa.Options{})
			y.Ledger().Record(sandbox.Effect{Key: "before", Kind: "payment", ObjectID: "p0"})
			m := mark(y)
			for i, k := range tc.keys {
				y.Ledger().Record(sandbox.Effect{Key: k, Kind: "payment", ObjectID: "p" + string(rune('1'+i))})
			}
			var row Row
			judgeEffects(&row, m, tc.intents)
			require.Len(t, row.Checks, 1)
			require.Equal(t, tc.pass, row.Checks[0].Pass, row.Checks[0].Detail)
			require.Equal(t, len(tc.keys), row.Effects)
			require.Contains(t, row.Checks[0].Detail, tc.detail)
		})
	}
}

func TestSameOutcome(t *testing.T) {
	t.Parallel()
	ok := operation.Result{Status: operation.ResultSucceeded, TargetObjectID: "pay-1"}
	other := operation.Result{Status: operation.ResultSucceeded, TargetObjectID: "pay-2"}
	conflict := operation.Result{Status: operation.ResultConflict, ErrorCode: "idempotency_key_payload_mismatch"}
	cases := map[string]struct {
		results map[string]operation.Result
		want    string
	}{
		"same object":    {results: map[string]operation.Result{"a": ok, "b": ok}},
		"two objects":    {results: map[string]operation.Result{"a": ok, "b": other}, want: "another copy"},
		"not succeeded":  {results: map[string]operation.Result{"a": ok, "b": conflict}, want: "conflict"},
		"missing result": {results: map[string]operation.Result{"a": ok}, want: "no result for b"},
		"no object id":   {results: map[string]operation.Result{"a": {Status: operation.ResultSucceeded}, "b": ok}, want: "without an object id"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obj, err := sameOutcome(tc.results, []string{"a", "b"})
			if tc.want == "" {
				require.NoError(t, err)
				require.Equal(t, "pay-1", obj)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestAttemptsArithmetic(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	atts := []journal.Attempt{
		{Attempt: 3, Kind: "execute", StartedAt: t0.Add(1600 * time.Millisecond), FinishedAt: t0.Add(1700 * time.Millisecond), Outcome: journal.OutcomeSucceeded},
		{Attempt: 1, Kind: "execute", StartedAt: t0, FinishedAt: t0.Add(100 * time.Millisecond), Outcome: journal.OutcomeFailedRetryable},
		{Attempt: 2, Kind: "execute", StartedAt: t0.Add(500 * time.Millisecond), FinishedAt: t0.Add(600 * time.Millisecond), Outcome: journal.OutcomeFailedRetryable},
		{Attempt: 3, Kind: "reconcile", StartedAt: t0.Add(2 * time.Second), Outcome: journal.OutcomeUnknown},
	}
	gap, ok := retryGap(atts, 2)
	require.True(t, ok)
	require.Equal(t, time.Second, gap)
	_, ok = retryGap(atts, 3)
	require.False(t, ok)
	executes, reconciled := countKinds(atts)
	require.Equal(t, 3, executes)
	require.Equal(t, 0, reconciled, "an unsettled reconcile round is not a reconciliation")
	atts = append(atts, journal.Attempt{Attempt: 3, Kind: "reconcile", Outcome: journal.OutcomeSucceeded})
	_, reconciled = countKinds(atts)
	require.Equal(t, 1, reconciled)
}

func TestProgress(t *testing.T) {
	t.Parallel()
	require.Equal(t, "[##########..........]", progressBar(5, 10, 20))
	require.Equal(t, "[####################]", progressBar(12, 10, 20))
	require.Equal(t, "", progressBar(1, 0, 20))

	var plain bytes.Buffer
	p := newProgress(&plain, false)
	p.waiting("charge", 0, 1)
	p.step("agent: charge %s", rub(125000))
	require.Equal(t, "  · agent: charge 1250.00 RUB\n", plain.String(), "no spinner when not a terminal")

	var tty bytes.Buffer
	p = newProgress(&tty, true)
	p.waiting("charge", 0, 1)
	p.step("done")
	require.Contains(t, tty.String(), "\r\033[K  ⠙ charge")
	require.True(t, strings.HasSuffix(tty.String(), "\r\033[K  · done\n"), "the spinner line is cleared before a finished line")
}

func TestSelectScenarios(t *testing.T) {
	t.Parallel()
	require.Len(t, selectScenarios(nil), len(IDs()))
	got := selectScenarios([]string{"replicas", "payment-conflict"})
	require.Equal(t, []string{"payment-conflict", "replicas"}, []string{got[0].id, got[1].id}, "run order is the script's")
	require.Empty(t, selectScenarios([]string{"nope"}))
}
