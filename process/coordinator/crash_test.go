package coordinator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/process/coordinator"
	"github.com/idemgate/idemgate/sandbox"
)

// killAt is a coordinator's Deps.AtBoundary that kills it (as SIGKILL
// would: nothing more written, acknowledged or released) at the n-th pass
// through boundary b for step, and says so on died.
type killAt struct {
	b    coordinator.Boundary
	step string
	n    int

	mu     sync.Mutex
	passes int
	died   chan struct{}
}

func newKillAt(b coordinator.Boundary, step string, n int) *killAt {
	return &killAt{b: b, step: step, n: n, died: make(chan struct{})}
}

func (k *killAt) hook(b coordinator.Boundary, _, step string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if b != k.b || step != k.step {
		return false
	}
	k.passes++
	if k.passes != k.n {
		return false
	}
	close(k.died)
	return true
}

// TestCoordinatorKilledAtEveryBoundary kills a coordinator at each
// boundary of a step — before its command is sent, once the journal holds
// its outcome, once the process moved on — going forward and
// compensating; another coordinator takes the process over once its
// command comes back and its lease runs out. Each run ends with the
// ledgers holding exactly the effects of a run without a crash, and no
// step or compensation executed twice (one execute attempt each).
func TestCoordinatorKilledAtEveryBoundary(t *testing.T) {
	t.Parallel()
	type crash struct {
		b    coordinator.Boundary
		step string
		n    int
	}
	cases := []struct {
		name    string
		o       func() order
		want    effects
		status  journal.ProcessStatus
		crashes []crash
	}{
		{"happy", func() order { return newOrder(cardOK, shipperOK) }, happyEffects, journal.ProcessSucceeded, []crash{
			{coordinator.BeforeStep, "invoice", 1},
			{coordinator.StepSettled, "charge", 1},
			{coordinator.Advanced, "charge", 1},
			{coordinator.BeforeStep, "shipping", 1},
			{coordinator.StepSettled, "shipping", 1},
			{coordinator.Advanced, "shipping", 1},
		}},
		{"declined", func() order { return newOrder(cardDecline, shipperOK) }, declinedEffects, journal.ProcessCompensated, []crash{
			{coordinator.StepSettled, "charge", 1},
			{coordinator.Advanced, "charge", 1},
			{coordinator.BeforeStep, "invoice/compensate", 1},
			{coordinator.StepSettled, "invoice/compensate", 1},
			{coordinator.Advanced, "invoice", 2},
		}},
		{"refused", func() order { return newOrder(cardOK, shipperNone) }, refusedEffects, journal.ProcessCompensated, []crash{
			{coordinator.StepSettled, "shipping", 1},
			{coordinator.BeforeStep, "charge/compensate", 1},
			{coordinator.StepSettled, "charge/compensate", 1},
			{coordinator.Advanced, "charge", 2},
			{coordinator.StepSettled, "invoice/compensate", 1},
		}},
	}
	for _, engine := range daemontest.Engines {
		for _, tc := range cases {
			for _, c := range tc.crashes {
				t.Run(engine+"/"+tc.name+"/"+string(c.b)+"@"+c.step, func(t *testing.T) {
					t.Parallel()
					b := setup(t, engine)
					kill := newKillAt(c.b, c.step, c.n)
					first := b.d.StartCoordinator(t, "coord-first", kill.hook)
					o := tc.o()
					results := make(chan operation.Result, 1)
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
						defer cancel()
						r, err := b.prod.PublishAndWait(ctx, o.command("evt-"+o.intent), o.key(), nil)
						if err != nil {
							t.Errorf("process: %v", err)
							close(results)
							return
						}
						results <- r
					}()
					select {
					case <-kill.died:
					case r := <-results:
						t.Fatalf("the process ended without passing %s@%s: %+v", c.b, c.step, r)
					}
					first.Stop() // what the dead one held stays unacknowledged
					b.d.StartCoordinator(t, "coord-second", nil)
					r, ok := <-results
					require.True(t, ok)
					v := view(t, r)
					require.Equal(t, tc.status, v.Status, "%+v", r)
					require.Equal(t, tc.want, b.effects(t, o))
					b.requireOneExecuteEach(t, v)
				})
			}
		}
	}
}

// requireOneExecuteEach checks that every step and compensation the
// process ran was executed once: one execute attempt in its trail.
func (b *bundle) requireOneExecuteEach(t *testing.T, v process.View) {
	t.Helper()
	for _, s := range v.Steps {
		for _, sv := range []*process.StepView{&s, s.Compensation} {
			if sv == nil || sv.Status == process.StepNotStarted {
				continue
			}
			atts, err := b.d.Journal.Attempts(context.Background(), sv.OperationKey)
			require.NoError(t, err)
			executes := 0
			for _, a := range atts {
				if a.Kind == journal.KindExecute {
					executes++
				}
			}
			require.Equal(t, 1, executes, "%s: %+v", sv.OperationKey, atts)
		}
	}
}

// TestLostAnswers loses the target's answer after it committed, in each
// kind of step: the worker looks the step up by its key, the process goes
// on with what the lookup found, and nothing is executed again or
// compensated on a guess.
func TestLostAnswers(t *testing.T) {
	t.Parallel()
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			b := setup(t, engine)
			var mu sync.Mutex
			var inject func(step string)
			b.d.StartCoordinator(t, "coord-a", func(bd coordinator.Boundary, _, step string) bool {
				mu.Lock()
				defer mu.Unlock()
				if bd == coordinator.BeforeStep && inject != nil {
					inject(step)
				}
				return false
			})
			lose := func(target interface{ InjectFault(sandbox.Fault) error }, at string) func(step string) {
				return func(step string) {
					if step == at {
						require.NoError(t, target.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
					}
				}
			}
			for _, tc := range []struct {
				name   string
				o      order
				at     string
				target interface{ InjectFault(sandbox.Fault) error }
				want   effects
				status journal.ProcessStatus
			}{
				{"charge", newOrder(cardOK, shipperOK), "charge", b.d.YooKassa, happyEffects, journal.ProcessSucceeded},
				{"declined charge", newOrder(cardDecline, shipperOK), "charge", b.d.YooKassa, declinedEffects, journal.ProcessCompensated},
				{"invoice", newOrder(cardOK, shipperOK), "invoice", b.d.OneC, happyEffects, journal.ProcessSucceeded},
				{"shipping", newOrder(cardOK, shipperOK), "shipping", b.d.Bitrix24, happyEffects, journal.ProcessSucceeded},
				{"refund", newOrder(cardOK, shipperNone), "charge/compensate", b.d.YooKassa, refusedEffects, journal.ProcessCompensated},
				{"invoice cancellation", newOrder(cardOK, shipperNone), "invoice/compensate", b.d.OneC, refusedEffects, journal.ProcessCompensated},
			} {
				t.Run(tc.name, func(t *testing.T) {
					mu.Lock()
					inject = lose(tc.target, tc.at)
					mu.Unlock()
					r := b.send(t, tc.o, "evt-"+tc.o.intent)
					v := view(t, r)
					require.Equal(t, tc.status, v.Status, "%+v", r)
					require.Equal(t, tc.want, b.effects(t, tc.o))
					b.requireOneExecuteEach(t, v)
					// The step whose answer was lost was settled by a lookup.
					key := stepKey(t, v, tc.at)
					atts, err := b.d.Journal.Attempts(context.Background(), key)
					require.NoError(t, err)
					kinds := []journal.AttemptKind{}
					for _, a := range atts {
						kinds = append(kinds, a.Kind)
					}
					require.Contains(t, kinds, journal.KindReconcile, "%s: %+v", key, atts)
				})
			}
		})
	}
}

// stepKey is the operation key of the named step ("charge") or
// compensation ("charge/compensate") in v.
func stepKey(t *testing.T, v process.View, name string) string {
	t.Helper()
	for _, s := range v.Steps {
		if s.Name == name {
			return s.OperationKey
		}
		if s.Compensation != nil && s.Name+"/compensate" == name {
			return s.Compensation.OperationKey
		}
	}
	t.Fatalf("no step %s", name)
	return ""
}
