package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
)

// TestArticleChecks runs the eight acceptance checks (docs/testing.md)
// against two daemon replicas for each kind of target, then the faults a
// production fleet meets: the lease owner killed (SIGKILL) after the target
// committed (9), an uncertain failure without effect (10), a graceful drain
// (11), and a killed owner's request landing after the take-over (12).
// Every check counts effects in the target's sandbox and create requests
// reaching it, not only responses.
func TestArticleChecks(t *testing.T) {
	skipShort(t)
	for _, tgt := range targets {
		t.Run(tgt.name, func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			c := newCluster(t, tgt)
			ds := c.startDaemons(tgt.adapter+"-replica-a", tgt.adapter+"-replica-b")
			t.Logf("%s: two replicas running after %v", tgt.name, time.Since(began).Round(time.Millisecond))
			s := &checks{c: c, replicas: ds}
			steps := []struct {
				name string
				run  func(t *testing.T)
			}{
				{"1_send", s.send},
				{"2_resend_same_body", s.resend},
				{"3_same_target_object_id", s.sameObject},
				{"4_one_object_in_target", s.oneObject},
				{"5_other_payload_conflicts", s.conflict},
				{"6_lost_response_is_unknown", s.lostResponse},
				{"7_reconciliation_finds_object", s.reconciliation},
				{"8_concurrent_twins_one_lease_owner", s.concurrentTwins},
				{"9_sigkill_mid_call_take_over", s.sigkillTakeOver},
				{"10_uncertain_failure_looked_up_before_retry", s.lookupBeforeRetry},
				{"11_sigterm_drains_the_call_in_flight", s.sigtermDrain},
				{"12_killed_owners_request_lands_after_take_over", s.lateLanding},
			}
			for _, st := range steps {
				stepBegan := time.Now()
				s.mark, _ = c.sb.requests.creates()
				// The cluster's helpers fail the check that calls them.
				ok := t.Run(st.name, func(st2 *testing.T) {
					c.t = st2
					defer func() { c.t = t }()
					st.run(st2)
				})
				t.Logf("%s/%s: %v", tgt.name, st.name, time.Since(stepBegan).Round(time.Millisecond))
				if !ok {
					t.Fatalf("%s failed: the later checks build on it", st.name)
				}
			}
			t.Logf("%s: all checks in %v", tgt.name, time.Since(began).Round(time.Millisecond))
		})
	}
}

// checks carries what one check leaves to the next.
type checks struct {
	c        *cluster
	replicas []*daemon

	first, dup, retry operation.Result
	lost              <-chan asyncResult
	// mark is the target's create-request count when the check began.
	mark int
}

// newCreates is how many create requests reached the target during this
// check.
func (s *checks) newCreates() int {
	started, _ := s.c.sb.requests.creates()
	return started - s.mark
}

const (
	intentDemo      = "order-demo-1" // checks 1–5
	intentLost      = "order-demo-2" // checks 6–7
	intentTwins     = "order-demo-3" // check 8
	intentTakenOver = "order-demo-4" // SIGKILL take-over
	intentRetried   = "order-demo-5" // uncertain failure without effect
	intentDrained   = "order-demo-6" // SIGTERM drain
	intentLate      = "order-demo-7" // a dead owner's request landing late
)

// 1. Send a request with the key test:<operation>:order-demo-1:v1.
func (s *checks) send(t *testing.T) {
	c := s.c
	key := c.key(intentDemo)
	require.Equal(t, "test:"+c.tgt.operation+":order-demo-1:v1", key)
	if c.tgt.operation == "invoice.create" {
		require.Equal(t, "test:invoice.create:order-demo-1:v1", key, "the documented key format")
	}
	s.first = c.send(c.command("evt-demo-1", intentDemo, false))
	require.Equal(t, operation.ResultSucceeded, s.first.Status, "%+v", s.first)
	require.Equal(t, key, s.first.OperationKey)
	require.NotEmpty(t, s.first.TargetObjectID)
	require.False(t, s.first.Replayed)
	require.Len(t, c.effects(key), 1, "one effect in the target")
	require.Equal(t, 1, s.newCreates(), "one create request reached the target")
}

// 2. Repeat the same request with the same key and body: once as the very
// same message (JetStream's de-duplication by event id) and once as a retry
// under a new event id that reaches the journal.
func (s *checks) resend(t *testing.T) {
	c := s.c
	s.dup = c.send(c.command("evt-demo-1", intentDemo, false))
	require.Equal(t, operation.ResultSucceeded, s.dup.Status, "%+v", s.dup)
	s.retry = c.send(c.command("evt-demo-1-retry", intentDemo, false))
	require.Equal(t, operation.ResultSucceeded, s.retry.Status, "%+v", s.retry)
	require.True(t, s.retry.Replayed, "the retry is answered from the journal")
	require.Equal(t, "evt-demo-1-retry", s.retry.EventID)
	require.Zero(t, s.newCreates(), "repeats never reach the target")
}

// 3. The same target_object_id comes back.
func (s *checks) sameObject(t *testing.T) {
	c := s.c
	require.Equal(t, s.first.TargetObjectID, s.dup.TargetObjectID)
	require.Equal(t, s.first.TargetObjectID, s.retry.TargetObjectID)
	rec, _ := c.row(c.key(intentDemo))
	require.Equal(t, s.first.TargetObjectID, rec.TargetObjectID, "the journal holds the same object id")
}

// 4. The target holds the object once.
func (s *checks) oneObject(t *testing.T) {
	c := s.c
	key := c.key(intentDemo)
	eff := c.effects(key)
	require.Len(t, eff, 1, "one %s in the target", c.tgt.operation)
	require.Equal(t, s.first.TargetObjectID, eff[0].ObjectID)
	require.Equal(t, 1, c.sb.core.TotalEffects(), "nothing else was created")
	rec, atts := c.row(key)
	require.Equal(t, journal.StatusSucceeded, rec.Status)
	require.Equal(t, 1, rec.AttemptCount, describe(rec, atts))
	require.Len(t, atts, 1, describe(rec, atts))
	require.Equal(t, journal.KindExecute, atts[0].Kind)
}

// 5. The same key with another amount (title for a task) is a conflict,
// and nothing new is created.
func (s *checks) conflict(t *testing.T) {
	c := s.c
	key := c.key(intentDemo)
	before, _ := c.row(key)
	res := c.send(c.command("evt-demo-1-changed", intentDemo, true))
	require.Equal(t, operation.ResultConflict, res.Status, "%+v", res)
	require.Equal(t, adapters.CodeKeyPayloadMismatch, res.ErrorCode)
	require.Empty(t, res.TargetObjectID, "a conflict carries no object")
	require.Len(t, c.effects(key), 1, "no new object")
	require.Equal(t, 1, c.sb.core.TotalEffects())
	after, atts := c.row(key)
	require.Equal(t, before.RequestHash, after.RequestHash, "the first payload's fingerprint stays")
	require.Equal(t, journal.StatusSucceeded, after.Status)
	require.Equal(t, s.first.TargetObjectID, after.TargetObjectID)
	require.Len(t, atts, 1, "no call was made: %s", describe(after, atts))
	require.Zero(t, s.newCreates(), "no call was made")
}

// 6. The response is lost after the target committed: the journal shows
// unknown, and unknown is not retried blindly — while lookups fail, lookup
// rounds pass and no second object appears.
func (s *checks) lostResponse(t *testing.T) {
	c := s.c
	key := c.key(intentLost)
	require.NoError(t, c.sb.core.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Count: 1}))
	s.lost = c.sendAsync(c.command("evt-demo-2", intentLost, false))
	waitFor(t, 30*time.Second, "the target to commit the effect", func() (bool, string) {
		n := len(c.effects(key))
		return n == 1, fmt.Sprintf("%d effects", n)
	})
	// The target committed and its answer hangs. From now on every lookup
	// fails, so the outcome can only stay unknown until check 7.
	require.NoError(t, c.sb.core.InjectFault(sandbox.Fault{Kind: sandbox.FaultHTTP503, Scope: sandbox.ScopeRead}))
	waitFor(t, 30*time.Second, "unknown with two failed lookups", func() (bool, string) {
		rec, atts, ok := c.rowIf(key)
		if !ok {
			return false, "no row"
		}
		return rec.Status == journal.StatusUnknown && rec.ReconcileRounds >= 2, describe(rec, atts)
	})
	rec, atts := c.traceJSON(key) // what `idemgate trace KEY --json` shows
	require.Equal(t, journal.StatusUnknown, rec.Status, describe(rec, atts))
	require.Empty(t, rec.TargetObjectID)
	exec := attemptsOf(atts, "execute")
	require.Len(t, exec, 1, "never retried blindly: %s", describe(rec, atts))
	require.Equal(t, journal.OutcomeUnknown, exec[0].Outcome, describe(rec, atts))
	require.NotEmpty(t, exec[0].ErrorCode, "a safe code says why")
	require.NotEmpty(t, attemptsOf(atts, "reconcile"), "lookups were tried: %s", describe(rec, atts))
	require.Len(t, c.effects(key), 1, "no second object while unknown")
	require.Equal(t, 1, s.newCreates(), "no second create request while unknown")
	t.Logf("unknown after a lost response: error_code=%s, %d unsettled lookup rounds", exec[0].ErrorCode, rec.ReconcileRounds)
}

// 7. Reconciliation finds the existing object by its key: the operation
// becomes succeeded with the object the target created, and the agent
// waiting since check 6 gets that object.
func (s *checks) reconciliation(t *testing.T) {
	c := s.c
	key := c.key(intentLost)
	c.sb.core.ClearFaults()
	out, err := c.tool("e2e-reconcile-cmd", "reconcile")
	require.NoError(t, err, "idemgate reconcile exits non-zero when a settlement fails: %s", out)
	// The daemons' own reconcilers run too: whichever takes the operation
	// over first settles it, so the pass's count is 0 or 1; none failed.
	require.Regexp(t, `found [01], not found 0, unsettled \d+, raised for review \d+, retryable and idle \d+, failed 0`, out)
	t.Logf("idemgate reconcile: %s", strings.TrimSpace(out))
	res := c.await(s.lost)
	eff := c.effects(key)
	require.Len(t, eff, 1, "still one object")
	require.Equal(t, operation.ResultSucceeded, res.res.Status, "%+v", res.res)
	require.Equal(t, eff[0].ObjectID, res.res.TargetObjectID, "the object the target created")
	require.True(t, res.sawPending, "the agent was told the outcome is being settled")
	waitFor(t, 10*time.Second, "the journal to record the reconciliation", func() (bool, string) {
		rec, atts := c.row(key)
		return rec.Status == journal.StatusSucceeded, describe(rec, atts)
	})
	rec, atts := c.row(key)
	require.Equal(t, eff[0].ObjectID, rec.TargetObjectID)
	require.Len(t, attemptsOf(atts, "execute"), 1, "found, not re-executed: %s", describe(rec, atts))
	rc := attemptsOf(atts, "reconcile")
	require.NotEmpty(t, rc)
	last := rc[len(rc)-1]
	require.Equal(t, journal.OutcomeSucceeded, last.Outcome, describe(rec, atts))
	require.Equal(t, rec.LeaseToken, last.Token, "the settling lookup held the current lease")
	require.Equal(t, 2, c.sb.core.TotalEffects())
	require.Zero(t, s.newCreates(), "found by lookup, nothing re-sent")
	t.Logf("reconciled by %s (note %q) after %d unsettled rounds", last.Worker, last.Note, len(rc)-1)
}

// 8. Two identical commands at once (two event ids, one intent, two
// replicas): one lease owner calls the target once; one effect.
func (s *checks) concurrentTwins(t *testing.T) {
	c := s.c
	key := c.key(intentTwins)
	op := c.tgt.operation
	type snap struct{ calls, executed, inProgress float64 }
	read := func(d *daemon) snap {
		return snap{
			calls:      d.metric(t, fmt.Sprintf(`idemgate_adapter_call_duration_seconds_count{operation=%q}`, op)),
			executed:   d.metric(t, "idemgate_operations_executed_total"),
			inProgress: d.metric(t, `idemgate_claim_decisions_total{decision="in_progress"}`),
		}
	}
	before := map[string]snap{}
	for _, d := range s.replicas {
		before[d.name] = read(d)
	}
	// The first create is slow: the twin meets a live lease.
	require.NoError(t, c.sb.core.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Delay: slowCreate, Count: 1}))
	a := c.sendAsync(c.command("evt-demo-3-a", intentTwins, false))
	b := c.sendAsync(c.command("evt-demo-3-b", intentTwins, false))
	ra, rb := c.await(a), c.await(b)
	require.Equal(t, operation.ResultSucceeded, ra.res.Status, "%+v", ra.res)
	require.Equal(t, operation.ResultSucceeded, rb.res.Status, "%+v", rb.res)
	require.Equal(t, ra.res.TargetObjectID, rb.res.TargetObjectID)
	eff := c.effects(key)
	require.Len(t, eff, 1, "one effect")
	require.Equal(t, eff[0].ObjectID, ra.res.TargetObjectID)

	rec, atts := c.row(key)
	require.Len(t, atts, 1, "one attempt: %s", describe(rec, atts))
	require.Equal(t, journal.KindExecute, atts[0].Kind)
	require.Equal(t, journal.OutcomeSucceeded, atts[0].Outcome)
	require.Equal(t, int64(1), rec.LeaseToken, "one lease was ever granted")
	require.Equal(t, atts[0].Worker, rec.LeaseOwner, "the lease owner is the one who called")
	require.Equal(t, 1, rec.AttemptCount)

	var calls, executed float64
	for _, d := range s.replicas {
		now := read(d)
		calls += now.calls - before[d.name].calls
		executed += now.executed - before[d.name].executed
		if d.name != rec.LeaseOwner {
			require.GreaterOrEqual(t, now.inProgress-before[d.name].inProgress, 1.0,
				"replica %s met the live lease of %s and did not call", d.name, rec.LeaseOwner)
		}
	}
	require.Equal(t, 1.0, calls, "one adapter call across both replicas")
	require.Equal(t, 1, s.newCreates(), "one create request reached the target")
	require.Equal(t, 1.0, executed)
	require.Equal(t, 3, c.sb.core.TotalEffects())
}

// SIGKILL mid-call: the replica holding the lease dies after the target
// committed and before it could record the outcome. The other replica takes
// over once the lease has expired, looks the operation up, finds the object,
// and creates nothing; `idemgate trace` tells the whole story.
func (s *checks) sigkillTakeOver(t *testing.T) {
	c := s.c
	key := c.key(intentTakenOver)
	require.NoError(t, c.sb.core.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Count: 1}))
	res := c.sendAsync(c.command("evt-demo-4", intentTakenOver, false))
	waitFor(t, 30*time.Second, "the target to commit the effect", func() (bool, string) {
		n := len(c.effects(key))
		return n == 1, fmt.Sprintf("%d effects", n)
	})
	rec, atts := c.row(key)
	require.Equal(t, journal.StatusStarted, rec.Status, describe(rec, atts))
	var victim, survivor *daemon
	for _, d := range s.replicas {
		if d.name == rec.LeaseOwner {
			victim = d
		} else {
			survivor = d
		}
	}
	require.NotNil(t, victim, "lease owner %q is one of the replicas", rec.LeaseOwner)
	killedAt := time.Now()
	c.kill(victim)
	// No heartbeat renews the lease from here on.
	dead, _ := c.row(key)
	require.Equal(t, journal.StatusStarted, dead.Status)

	r := c.await(res)
	took := time.Since(killedAt)
	eff := c.effects(key)
	require.Len(t, eff, 1, "no second effect")
	require.Equal(t, operation.ResultSucceeded, r.res.Status, "%+v", r.res)
	require.Equal(t, eff[0].ObjectID, r.res.TargetObjectID)
	require.Equal(t, 4, c.sb.core.TotalEffects())
	require.Equal(t, 1, s.newCreates(), "the survivor created nothing")

	waitFor(t, 10*time.Second, "the journal to record the take-over", func() (bool, string) {
		rec, atts := c.row(key)
		return rec.Status == journal.StatusSucceeded, describe(rec, atts)
	})
	rec, atts = c.row(key)
	require.Equal(t, eff[0].ObjectID, rec.TargetObjectID)
	exec := attemptsOf(atts, "execute")
	require.Len(t, exec, 1, "executed once: %s", describe(rec, atts))
	require.Equal(t, victim.name, exec[0].Worker)
	require.Equal(t, journal.OutcomeAbandoned, exec[0].Outcome, "the killed worker never finished its attempt: the take-over closed it")
	var takeOver *journal.Attempt
	for i, a := range attemptsOf(atts, "reconcile") {
		if a.Outcome == journal.OutcomeSucceeded {
			takeOver = &attemptsOf(atts, "reconcile")[i]
		}
	}
	require.NotNil(t, takeOver, describe(rec, atts))
	require.Equal(t, survivor.name, takeOver.Worker)
	require.False(t, takeOver.StartedAt.Before(dead.LeaseUntil),
		"taken over only after the lease expired (lease until %v, take-over %v)", dead.LeaseUntil, takeOver.StartedAt)
	t.Logf("%s killed; %s took over %v after the kill", victim.name, survivor.name, took.Round(time.Millisecond))

	// The human trace lists the killed worker's execute attempt and the
	// survivor's reconcile attempt.
	out, err := c.tool("e2e-trace", "trace", key)
	require.NoError(t, err)
	t.Logf("idemgate trace %s:\n%s", key, out)
	require.Contains(t, out, "operation  "+key)
	require.Regexp(t, `(?m)^status\s+succeeded$`, out)
	require.Regexp(t, `(?m)^object\s+`+regexp.QuoteMeta(rec.TargetObjectID)+`$`, out)
	require.Regexp(t, `(?m)^\d+\s+execute\s+`+regexp.QuoteMeta(victim.name)+`\s`, out)
	require.Regexp(t, `(?m)^\d+\s+reconcile\s+`+regexp.QuoteMeta(survivor.name)+`\s+\d+\s+\S+\s+\S+\s+succeeded\s`, out)
}

// An uncertain failure that did not take effect (a 500 from a proxy before
// the target processed anything): the outcome is unknown, so the target is
// looked up first; only when the lookup finds nothing is the call repeated,
// with the same key, and the intent ends with exactly one effect.
func (s *checks) lookupBeforeRetry(t *testing.T) {
	c := s.c
	key := c.key(intentRetried)
	require.NoError(t, c.sb.core.InjectFault(sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1,
		Status: 500, Body: "<html><body><h1>500 Internal Server Error</h1></body></html>"}))
	r := c.await(c.sendAsync(c.command("evt-demo-5", intentRetried, false)))
	require.Equal(t, operation.ResultSucceeded, r.res.Status, "%+v", r.res)
	require.True(t, r.sawPending, "the agent was told the outcome is being settled")
	eff := c.effects(key)
	require.Len(t, eff, 1, "one effect after the retry")
	require.Equal(t, eff[0].ObjectID, r.res.TargetObjectID)
	require.Equal(t, 5, c.sb.core.TotalEffects())

	waitFor(t, 10*time.Second, "the journal to record the outcome", func() (bool, string) {
		rec, atts := c.row(key)
		return rec.Status == journal.StatusSucceeded, describe(rec, atts)
	})
	rec, atts := c.row(key)
	exec := attemptsOf(atts, "execute")
	require.Len(t, exec, 2, describe(rec, atts))
	require.Equal(t, journal.OutcomeUnknown, exec[0].Outcome, describe(rec, atts))
	require.Equal(t, journal.OutcomeSucceeded, exec[1].Outcome, describe(rec, atts))
	var notFound *journal.Attempt
	for _, a := range attemptsOf(atts, "reconcile") {
		if a.Outcome == journal.OutcomeFailedRetryable {
			notFound = &a
		}
	}
	require.NotNil(t, notFound, "a lookup found nothing before the retry: %s", describe(rec, atts))
	require.False(t, exec[1].StartedAt.Before(notFound.FinishedAt),
		"the retry began only after the lookup settled: %s", describe(rec, atts))
	require.Equal(t, 2, rec.AttemptCount)
	require.Equal(t, 2, s.newCreates(), "the failed call and its one retry")
}

// SIGTERM while a call is in flight: the replica stops fetching, lets the
// call finish, records and publishes the outcome, acks, and exits 0.
func (s *checks) sigtermDrain(t *testing.T) {
	c := s.c
	key := c.key(intentDrained)
	var live *daemon
	for _, d := range s.replicas {
		if !d.killed {
			live = d
		}
	}
	require.NotNil(t, live)
	require.NoError(t, c.sb.core.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Delay: slowCreate, Count: 1}))
	res := c.sendAsync(c.command("evt-demo-6", intentDrained, false))
	waitFor(t, 30*time.Second, "the call to start", func() (bool, string) {
		rec, atts, ok := c.rowIf(key)
		if !ok {
			return false, "no row"
		}
		return rec.Status == journal.StatusStarted && rec.LeaseOwner == live.name, describe(rec, atts)
	})
	require.NoError(t, live.cmd.Process.Signal(syscall.SIGTERM))
	r := c.await(res)
	require.Equal(t, operation.ResultSucceeded, r.res.Status, "%+v", r.res)
	select {
	case <-live.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not exit after draining")
	}
	require.True(t, live.cmd.ProcessState.Success(), "exit status %v", live.cmd.ProcessState)
	eff := c.effects(key)
	require.Len(t, eff, 1)
	require.Equal(t, eff[0].ObjectID, r.res.TargetObjectID)
	rec, atts := c.row(key)
	require.Equal(t, journal.StatusSucceeded, rec.Status)
	require.Len(t, atts, 1, describe(rec, atts))
	require.Equal(t, live.name, atts[0].Worker)
	require.Equal(t, 1, s.newCreates())
	out := live.out.String()
	require.Contains(t, out, `"msg":"draining"`)
	require.Contains(t, out, `"msg":"stopped"`)
}

// A replica is killed while its create request is still queued in the
// target; the request lands later, after another replica took over, found
// nothing, and executed again with the same key. The target's key protection
// (or, for a target without one, the adapter's settle time) must absorb the
// late request: one effect.
func (s *checks) lateLanding(t *testing.T) {
	fresh := s.c.startDaemons(s.c.tgt.adapter+"-replica-c", s.c.tgt.adapter+"-replica-d")
	lateLandingScenario(t, s.c, fresh, intentLate)
}

func lateLandingScenario(t *testing.T, c *cluster, replicas []*daemon, intent string) {
	key := c.key(intent)
	mark, _ := c.sb.requests.creates()
	newCreates := func() int { n, _ := c.sb.requests.creates(); return n - mark }
	require.NoError(t, c.sb.core.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Delay: lateLanding, Count: 1}))
	res := c.sendAsync(c.command("evt-"+intent, intent, false))
	waitFor(t, 30*time.Second, "the create request to reach the target", func() (bool, string) {
		return newCreates() == 1, fmt.Sprintf("%d create requests", newCreates())
	})
	rec, atts := c.row(key)
	var victim *daemon
	for _, d := range replicas {
		if d.name == rec.LeaseOwner {
			victim = d
		}
	}
	require.NotNil(t, victim, describe(rec, atts))
	c.kill(victim)
	r := c.await(res)
	require.Equal(t, operation.ResultSucceeded, r.res.Status, "%+v", r.res)
	waitFor(t, lateLanding+20*time.Second, "the dead owner's request to land", func() (bool, string) {
		started, settled := c.sb.requests.creates()
		return started == settled, fmt.Sprintf("%d create requests, %d finished", started, settled)
	})
	rec, atts = c.row(key)
	eff := c.effects(key)
	t.Logf("after the late landing: %d effects, %d create requests; %s", len(eff), newCreates(), describe(rec, atts))
	require.Len(t, eff, 1, "the late request of a dead owner created a second object")
	require.Equal(t, eff[0].ObjectID, r.res.TargetObjectID)
	require.Equal(t, eff[0].ObjectID, rec.TargetObjectID)
}
