package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/producer"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
)

// TestApprovalGatedSteps: with approvals on, a money step (the charge) and
// a money compensation (the refund) each wait for a person like any
// operation, the process command not held meanwhile; an approved step goes
// on, a denied charge is a final refusal that compensates the invoice, a
// denied refund leaves the process for review. Effects counted in the
// ledgers.
func TestApprovalGatedSteps(t *testing.T) {
	t.Parallel()
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := daemontest.StartWith(t, engine, daemontest.Options{Processes: map[string]process.Decl{"order.checkout": checkout()}, Approvals: true})
			d.StartCoordinator(t, "coord-approvals", nil)
			b := &bundle{d: d}
			var err error
			b.prod, err = newProducer(d)
			require.NoError(t, err)
			def, _ := d.Processes.Lookup("order.checkout")

			// run sends the order and, as each of its money operations
			// (by key) comes to wait, decides it; it returns the final result.
			type decision struct {
				step string
				vote journal.Vote
			}
			run := func(o order, decide ...decision) operation.Result {
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
				pk, err := operation.ParseKey(o.key())
				require.NoError(t, err)
				keys, err := def.KeysOf(pk)
				require.NoError(t, err)
				waiting := map[string]string{"charge": keys.Steps[1].String(), "charge/compensate": keys.Compensations[1].String()}
				for _, dc := range decide {
					key := waiting[dc.step]
					awaitStatus(t, d, key, journal.StatusAwaitingApproval)
					_, err := d.Approvals.Decide(context.Background(), "alice", key, dc.vote, "checked by a person")
					require.NoError(t, err, dc.step)
				}
				r, ok := <-results
				require.True(t, ok)
				return r
			}

			t.Run("approved", func(t *testing.T) {
				o := newOrder(cardOK, shipperOK)
				r := run(o, decision{"charge", journal.VoteApprove})
				require.Equal(t, journal.ProcessSucceeded, view(t, r).Status, "%+v", r)
				require.Equal(t, happyEffects, b.effects(t, o))
			})
			t.Run("charge denied", func(t *testing.T) {
				o := newOrder(cardOK, shipperOK)
				r := run(o, decision{"charge", journal.VoteDeny})
				v := view(t, r)
				require.Equal(t, journal.ProcessCompensated, v.Status, "%+v", r)
				require.Equal(t, journal.ErrorApprovalDenied, r.ErrorCode)
				require.Equal(t, effects{"invoice": 1, sbonec.EffectInvoiceCancel: 1}, b.effects(t, o), "nothing was charged")
			})
			t.Run("refund approved", func(t *testing.T) {
				o := newOrder(cardOK, shipperNone)
				r := run(o, decision{"charge", journal.VoteApprove}, decision{"charge/compensate", journal.VoteApprove})
				require.Equal(t, journal.ProcessCompensated, view(t, r).Status, "%+v", r)
				require.Equal(t, refusedEffects, b.effects(t, o))
			})
			t.Run("refund denied", func(t *testing.T) {
				o := newOrder(cardOK, shipperNone)
				r := run(o, decision{"charge", journal.VoteApprove}, decision{"charge/compensate", journal.VoteDeny})
				v := view(t, r)
				require.Equal(t, journal.ProcessNeedsReview, v.Status, "%+v", r)
				require.Equal(t, process.CodeNeedsReview, r.ErrorCode)
				require.Equal(t, "charge", v.FailedStep)
				require.Equal(t, journal.ErrorApprovalDenied, v.ErrorCode)
				require.Equal(t, effects{"invoice": 1, "payment": 1}, b.effects(t, o), "the refund was refused by a person: the money stays moved, for review")
			})
		})
	}
}

// awaitStatus waits until the journal reports key in status st.
func awaitStatus(t *testing.T, d *daemontest.Daemon, key string, st journal.Status) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rec, err := d.Journal.Get(context.Background(), key)
		if err == nil && rec.Status == st {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s never reached %s (last: %+v, %v)", key, st, rec, err)
		time.Sleep(50 * time.Millisecond)
	}
}

func newProducer(d *daemontest.Daemon) (*producer.Client, error) { return producer.New(d.NC, "") }
