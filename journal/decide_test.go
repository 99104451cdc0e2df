package journal_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// TestDecideExisting is the claim decision table both engines share: every
// status, with a live lease or none, with the row's request hash or another.
func TestDecideExisting(t *testing.T) {
	type want struct {
		d       journal.Decision
		settled bool
	}
	cases := []struct {
		status journal.Status
		live   bool
		same   want // the row's request hash
	}{
		{journal.StatusSucceeded, false, want{journal.ReplaySucceeded, true}},
		{journal.StatusSucceeded, true, want{journal.ReplaySucceeded, true}},
		{journal.StatusFailedFinal, false, want{journal.ReplayFailed, true}},
		{journal.StatusStarted, true, want{journal.InProgress, true}},
		{journal.StatusStarted, false, want{journal.InProgress, false}},
		{journal.StatusUnknown, true, want{journal.InProgress, true}},
		{journal.StatusUnknown, false, want{journal.InProgress, false}},
		{journal.StatusFailedRetryable, true, want{journal.InProgress, true}},
		{journal.StatusFailedRetryable, false, want{journal.InProgress, false}},
	}
	for _, c := range cases {
		rec := journal.Record{Key: "k", RequestHash: "h1", Status: c.status}
		d, settled := journal.DecideExisting(&journal.ClaimRequest{Key: "k", RequestHash: "h1"}, &rec, c.live)
		if d != c.same.d || settled != c.same.settled {
			t.Errorf("%s live=%v: %s settled=%v, want %s settled=%v", c.status, c.live, d, settled, c.same.d, c.same.settled)
		}
		d, settled = journal.DecideExisting(&journal.ClaimRequest{Key: "k", RequestHash: "h2"}, &rec, c.live)
		if d != journal.Conflict || !settled {
			t.Errorf("%s live=%v, other hash: %s settled=%v, want a settled conflict", c.status, c.live, d, settled)
		}
	}
}

// TestTakeOver: a retryable failure taken over is a new attempt; an unknown
// outcome or an expired lease is reconciled; each opens its kind of attempt.
func TestTakeOver(t *testing.T) {
	for from, want := range map[journal.Status]journal.Decision{
		journal.StatusFailedRetryable: journal.Execute,
		journal.StatusUnknown:         journal.Reconcile,
		journal.StatusStarted:         journal.Reconcile,
	} {
		if got := journal.TakeOver(from); got != want {
			t.Errorf("take-over of %s: %s, want %s", from, got, want)
		}
	}
	if journal.Execute.AttemptKind() != journal.KindExecute || journal.Reconcile.AttemptKind() != journal.KindReconcile ||
		journal.ReplaySucceeded.AttemptKind() != "" {
		t.Error("a lease's decision names its attempt kind; other decisions none")
	}
	for _, k := range []journal.AttemptKind{journal.KindExecute, journal.KindReconcile, journal.KindOperator} {
		if !k.Valid() {
			t.Errorf("%s is not valid", k)
		}
	}
	if journal.AttemptKind("retry").Valid() {
		t.Error("an unknown kind is valid")
	}
}

// TestNotApplied: why a completion did not apply, from its row.
func TestNotApplied(t *testing.T) {
	c := &journal.Completion{Key: "k", Token: 3, Status: journal.StatusSucceeded}
	cases := []struct {
		name string
		row  journal.CompletionRow
		want error // nil: already recorded
		open bool
	}{
		{"gone", journal.CompletionRow{}, journal.ErrNotFound, false},
		{"taken over", journal.CompletionRow{Found: true, Status: journal.StatusStarted, Token: 4}, journal.ErrStaleToken, false},
		{"already recorded", journal.CompletionRow{Found: true, Status: journal.StatusSucceeded, Token: 3}, nil, false},
		{"final otherwise", journal.CompletionRow{Found: true, Status: journal.StatusFailedFinal, Token: 3}, journal.ErrIllegalTransition, false},
		{"still open", journal.CompletionRow{Found: true, Status: journal.StatusStarted, Token: 3}, journal.ErrIllegalTransition, true},
	}
	for _, tc := range cases {
		err := journal.NotApplied(c, tc.row)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if got := tc.row.Open(c); got != tc.open {
			t.Errorf("%s: open %v, want %v", tc.name, got, tc.open)
		}
	}
	// A retryable outcome is recorded for good too; an unknown one may
	// still change under the same token.
	retry := &journal.Completion{Key: "k", Token: 3, Status: journal.StatusFailedRetryable}
	if !(journal.CompletionRow{Found: true, Status: journal.StatusFailedRetryable, Token: 3}).Recorded(retry) {
		t.Error("a retryable outcome under the same token is recorded")
	}
	unknown := &journal.Completion{Key: "k", Token: 3, Status: journal.StatusUnknown}
	if !(journal.CompletionRow{Found: true, Status: journal.StatusUnknown, Token: 3}).Open(unknown) {
		t.Error("an unknown row under the same token may be completed as unknown again")
	}
}

// TestResolveRefusal: never a final row; a live execute only when forced;
// the refusal of a final row says "already final", which operators read.
func TestResolveRefusal(t *testing.T) {
	r := journal.Resolution{Key: "k", Status: journal.StatusSucceeded}
	for _, st := range []journal.Status{journal.StatusSucceeded, journal.StatusFailedFinal} {
		if r.Applies(st, false) {
			t.Errorf("a resolution applies to %s", st)
		}
	}
	for _, st := range []journal.Status{journal.StatusStarted, journal.StatusUnknown, journal.StatusFailedRetryable} {
		if !r.Applies(st, false) {
			t.Errorf("a resolution does not apply to %s", st)
		}
	}
	if r.Applies(journal.StatusStarted, true) {
		t.Error("a resolution applies over a live execute unforced")
	}
	r.Force = true
	if !r.Applies(journal.StatusStarted, true) {
		t.Error("a forced resolution does not apply over a live execute")
	}
	err := journal.ResolveRefused(journal.Record{Key: "k", Status: journal.StatusSucceeded, TargetObjectID: "obj-1"})
	if !errors.Is(err, journal.ErrIllegalTransition) || !strings.Contains(err.Error(), "already final (succeeded object obj-1)") {
		t.Errorf("refusal of a final row: %v", err)
	}
	err = journal.ResolveRefused(journal.Record{Key: "k", Status: journal.StatusStarted, LeaseOwner: "w1"})
	if !errors.Is(err, journal.ErrLeaseHeld) || !strings.Contains(err.Error(), "worker w1 is executing it") {
		t.Errorf("refusal of a live execute: %v", err)
	}
}

// TestSharedChecks: the argument checks and messages both engines use.
func TestSharedChecks(t *testing.T) {
	if !errors.Is(journal.ValidateHeartbeat(0), journal.ErrInvalid) || journal.ValidateHeartbeat(time.Second) != nil {
		t.Error("a heartbeat needs a TTL of a millisecond or more")
	}
	for _, bad := range []struct {
		owner string
		ttl   time.Duration
		limit int
	}{{"", time.Second, 1}, {"r", 0, 1}, {"r", time.Second, 0}} {
		if !errors.Is(journal.ValidateTakeOver(bad.owner, bad.ttl, bad.limit), journal.ErrInvalid) {
			t.Errorf("take-over %+v accepted", bad)
		}
	}
	if journal.ValidateTakeOver("r", time.Second, 1) != nil {
		t.Error("a valid take-over refused")
	}
	if err := journal.LeaseLost(journal.LeaseRef{Key: "k", Token: 2}); !errors.Is(err, journal.ErrStaleToken) || !strings.Contains(err.Error(), "k with token 2") {
		t.Errorf("lease lost: %v", err)
	}
	cause := errors.New("connection reset")
	if err := journal.ClaimFailed(cause); !errors.Is(err, cause) || !strings.Contains(err.Error(), "will expire and be reconciled") {
		t.Errorf("claim failed: %v", err)
	}
	if journal.ListLimit(0) != 100 || journal.ListLimit(-1) != 100 || journal.ListLimit(7) != 7 {
		t.Error("list limit")
	}
	got := journal.InOrder([]string{"c", "a", "b", "a"}, map[string]bool{"a": true, "c": true})
	if strings.Join(got, ",") != "c,a" {
		t.Errorf("in order: %v", got)
	}
}
