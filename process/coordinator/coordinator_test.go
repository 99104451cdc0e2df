package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/sandbox"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A coordinator killed at a boundary (TestCoordinatorKilledAtEveryBoundary)
		// leaves the command it held unsettled, as a dead process would; its
		// Router's drain gives up waiting for it, and the waiter stays.
		goleak.IgnoreAnyFunction("github.com/idemgate/idemgate/consumer.(*Router).Drain.func1"))
}

// checkout is the worked example (daemontest.Checkout).
func checkout() process.Decl { return daemontest.Checkout() }

// Accounts and responsibles the emulators accept or refuse.
const (
	cardOK      = "saved-card-ok"
	cardDecline = sbyookassa.MethodDeclined
	shipperOK   = "12"
	shipperNone = "nobody" // Bitrix24 refuses a responsible that is not a user id
)

type bundle struct {
	d    *daemontest.Daemon
	prod *producer.Client
}

func setup(t *testing.T, engine string) *bundle {
	t.Helper()
	d := daemontest.StartWith(t, engine, daemontest.Options{Processes: map[string]process.Decl{"order.checkout": checkout()}})
	prod, err := producer.New(d.NC, "")
	require.NoError(t, err)
	return &bundle{d: d, prod: prod}
}

var intents atomic.Int64

// order is a fresh checkout intent.
type order struct {
	intent, account, responsible string
}

func newOrder(account, responsible string) order {
	return order{intent: fmt.Sprintf("order-%d", intents.Add(1)), account: account, responsible: responsible}
}

func (o order) key() string { return daemontest.Env + ":process.order.checkout:" + o.intent + ":v1" }

func (o order) command(eventID string) operation.Command {
	payload, _ := json.Marshal(map[string]any{
		"order_id": o.intent, "customer_id": "cust-17", "account_id": o.account, "amount_minor": 125000,
		"currency": "RUB", "responsible_id": o.responsible,
	})
	return operation.Command{EventID: eventID, Operation: "process.order.checkout", IntentID: o.intent, ApprovalID: "appr-" + o.intent, Payload: payload}
}

// requireWorded: a process result on NATS carries the next_action and
// reason of the answer table for the process's state, as the worker's
// results do for an operation's — the words every face gives.
func requireWorded(t *testing.T, r operation.Result, next answer.NextAction, reason string) {
	t.Helper()
	require.Equal(t, string(next), r.NextAction, "%+v", r)
	require.Contains(t, r.Reason, reason)
	a := process.Answer(answer.Thresholds{}, view(t, r), r.Operation)
	require.Equal(t, string(a.NextAction), r.NextAction)
	require.Equal(t, a.Reason, r.Reason)
	require.Equal(t, a.Status, string(r.Status))
}

// send publishes the order's process command (event id evt) and waits for
// its final result.
func (b *bundle) send(t *testing.T, o order, evt string) operation.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r, err := b.prod.PublishAndWait(ctx, o.command(evt), o.key(), nil)
	require.NoError(t, err)
	return r
}

func view(t *testing.T, r operation.Result) process.View {
	t.Helper()
	var v process.View
	require.NoError(t, json.Unmarshal(r.Result, &v), "result: %s", r.Result)
	return v
}

// effects counts the effects of the order's steps by kind, across the
// three emulators' ledgers, each effect under the key the adapter sent.
type effects map[string]int

func (b *bundle) effects(t *testing.T, o order) effects {
	t.Helper()
	keys := b.targetKeys(t, o)
	out := effects{}
	for _, l := range []*sandbox.Ledger{b.d.OneC.Ledger(), b.d.YooKassa.Ledger(), b.d.Bitrix24.Ledger()} {
		for _, e := range l.Effects() {
			if keys[e.Key] {
				out[e.Kind]++
			}
		}
	}
	return out
}

// targetKeys are the keys the adapters send for the order's steps and
// compensations: each step key, as each target takes it (a digest past
// its length limit).
func (b *bundle) targetKeys(t *testing.T, o order) map[string]bool {
	t.Helper()
	pk, err := operation.ParseKey(o.key())
	require.NoError(t, err)
	def, ok := b.d.Processes.Lookup("order.checkout")
	require.True(t, ok)
	keys, err := def.KeysOf(pk)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, k := range append(keys.Steps, keys.Compensations...) {
		for _, max := range []int{onec.DefaultMaxKeyLen, yookassa.MaxKeyLen, bitrix24.DefaultMaxKeyLen} {
			out[adapters.TargetKey(k.String(), max)] = true
		}
	}
	return out
}

// stepStatus is each step's (and compensation's) journal status by name
// ("invoice", "invoice/compensate").
func stepStatus(v process.View) map[string]string {
	out := map[string]string{}
	for _, s := range v.Steps {
		out[s.Name] = s.Status
		if s.Compensation != nil {
			out[s.Name+"/compensate"] = s.Compensation.Status
		}
	}
	return out
}

var (
	happyEffects    = effects{"invoice": 1, "payment": 1, "activity": 1}
	declinedEffects = effects{"invoice": 1, "payment_canceled": 1, sbonec.EffectInvoiceCancel: 1}
	refusedEffects  = effects{"invoice": 1, "payment": 1, "refund": 1, sbonec.EffectInvoiceCancel: 1}
)

func TestCheckout(t *testing.T) {
	t.Parallel()
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			b := setup(t, engine)
			b.d.StartCoordinator(t, "coord-a", nil)

			t.Run("HappyPath", func(t *testing.T) {
				o := newOrder(cardOK, shipperOK)
				r := b.send(t, o, "evt-"+o.intent)
				require.Equal(t, operation.ResultSucceeded, r.Status, "%+v", r)
				v := view(t, r)
				require.Equal(t, journal.ProcessSucceeded, v.Status)
				require.Equal(t, map[string]string{"invoice": "succeeded", "invoice/compensate": process.StepNotStarted,
					"charge": "succeeded", "charge/compensate": process.StepNotStarted, "shipping": "succeeded"}, stepStatus(v))
				for _, s := range v.Steps {
					require.NotEmpty(t, s.TargetObjectID, s.Name)
				}
				require.Equal(t, happyEffects, b.effects(t, o))
				requireWorded(t, r, answer.Done, "every step made its effect once (invoice: ")

				// The same intent with other input: a conflict, worded by
				// the conflict rule; nothing more runs.
				changed := o
				changed.account = cardDecline
				c := b.send(t, changed, "evt-"+o.intent+"-changed")
				require.Equal(t, operation.ResultConflict, c.Status, "%+v", c)
				require.Equal(t, string(answer.NewIntentRequired), c.NextAction)
				require.Equal(t, answer.CodeKeyPayloadMismatch, c.ErrorCode)
				require.Contains(t, c.Reason, "nothing was executed for this one")
				require.Equal(t, happyEffects, b.effects(t, o))
			})

			t.Run("DeclinedCharge", func(t *testing.T) {
				o := newOrder(cardDecline, shipperOK)
				r := b.send(t, o, "evt-"+o.intent)
				require.Equal(t, operation.ResultFailedFinal, r.Status, "%+v", r)
				require.Equal(t, "declined", r.ErrorCode)
				requireWorded(t, r, answer.HumanReview, "step charge was refused for good (declined) and the steps before it were compensated (invoice: ")
				v := view(t, r)
				require.Equal(t, journal.ProcessCompensated, v.Status)
				require.Equal(t, "charge", v.FailedStep)
				require.Equal(t, map[string]string{"invoice": "succeeded", "invoice/compensate": "succeeded",
					"charge": "failed_final", "charge/compensate": process.StepNotStarted, "shipping": process.StepNotStarted}, stepStatus(v))
				// Invoice made once and cancelled once; no money moved.
				require.Equal(t, declinedEffects, b.effects(t, o))
				cancelled, ok := b.d.OneC.Cancelled(v.Steps[0].TargetObjectID)
				require.True(t, ok, "the invoice is cancelled by its own document")
				require.Equal(t, v.Steps[0].Compensation.TargetObjectID, cancelled)
			})

			t.Run("ShippingRefusedAfterCharge", func(t *testing.T) {
				o := newOrder(cardOK, shipperNone)
				r := b.send(t, o, "evt-"+o.intent)
				require.Equal(t, operation.ResultFailedFinal, r.Status, "%+v", r)
				require.Equal(t, "validation_error", r.ErrorCode)
				v := view(t, r)
				require.Equal(t, journal.ProcessCompensated, v.Status)
				require.Equal(t, "shipping", v.FailedStep)
				require.Equal(t, map[string]string{"invoice": "succeeded", "invoice/compensate": "succeeded",
					"charge": "succeeded", "charge/compensate": "succeeded", "shipping": "failed_final"}, stepStatus(v))
				require.Equal(t, refusedEffects, b.effects(t, o))
				// Newest first: the refund before the cancellation.
				refund := b.effectOf(t, b.d.YooKassa.Ledger(), "refund", o)
				cancel := b.effectOf(t, b.d.OneC.Ledger(), sbonec.EffectInvoiceCancel, o)
				require.True(t, refund.At.Before(cancel.At), "refund %v, cancellation %v", refund.At, cancel.At)
			})

			t.Run("SentFiveTimes", func(t *testing.T) {
				for _, tc := range []struct {
					name    string
					o       order
					effects effects
					status  operation.ResultStatus
				}{
					{"happy", newOrder(cardOK, shipperOK), happyEffects, operation.ResultSucceeded},
					{"declined", newOrder(cardDecline, shipperOK), declinedEffects, operation.ResultFailedFinal},
					{"refused", newOrder(cardOK, shipperNone), refusedEffects, operation.ResultFailedFinal},
				} {
					var first process.View
					for i := range 5 {
						// The same event id (a copy the stream drops), then
						// new event ids for the same intent (copies the
						// journal answers).
						evt := "evt-" + tc.o.intent
						if i >= 2 {
							evt = fmt.Sprintf("evt-%s-%d", tc.o.intent, i)
						}
						r := b.send(t, tc.o, evt)
						require.Equal(t, tc.status, r.Status, "%s send %d: %+v", tc.name, i, r)
						v := view(t, r)
						if i == 0 {
							first = v
							continue
						}
						require.True(t, r.Replayed, "%s send %d is answered from the journal", tc.name, i)
						require.Equal(t, first, v, "%s send %d: the same story", tc.name, i)
					}
					require.Equal(t, tc.effects, b.effects(t, tc.o), tc.name)
				}
			})

			t.Run("TwentyConcurrentCopies", func(t *testing.T) {
				for _, tc := range []struct {
					o       order
					effects effects
				}{
					{newOrder(cardOK, shipperOK), happyEffects},
					{newOrder(cardOK, shipperNone), refusedEffects},
				} {
					results := make([]operation.Result, 20)
					var wg sync.WaitGroup
					for i := range results {
						wg.Go(func() {
							ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
							defer cancel()
							r, err := b.prod.PublishAndWait(ctx, tc.o.command(fmt.Sprintf("evt-%s-copy-%d", tc.o.intent, i)), tc.o.key(), nil)
							if err != nil {
								t.Errorf("copy %d: %v", i, err)
								return
							}
							results[i] = r
						})
					}
					wg.Wait()
					for i, r := range results {
						require.Equal(t, results[0].Status, r.Status, "copy %d", i)
						require.Equal(t, stepStatus(view(t, results[0])), stepStatus(view(t, r)), "copy %d", i)
					}
					require.Equal(t, tc.effects, b.effects(t, tc.o))
				}
			})
		})
	}
}

// effectOf is the one effect of kind made for the order's steps in l.
func (b *bundle) effectOf(t *testing.T, l *sandbox.Ledger, kind string, o order) sandbox.Effect {
	t.Helper()
	keys := b.targetKeys(t, o)
	var found []sandbox.Effect
	for _, e := range l.Effects() {
		if e.Kind == kind && keys[e.Key] {
			found = append(found, e)
		}
	}
	require.Len(t, found, 1, "%s effects", kind)
	return found[0]
}
