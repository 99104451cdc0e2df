package yookassa_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
	sbyk "github.com/idemgate/idemgate/sandbox/yookassa"
)

// shopRate is the sustained rate the volume tests hold the shop at.
const shopRate = 50 // payments a second

// busyShop is an emulator on a clock the test moves, holding a shop's
// other traffic at shopRate from a minute before the lookups' window to a
// minute after it (with the defaults, LookupSkew 5m and LookupLate 1m: six
// minutes before the call to seven after), and an adapter with the default
// lookup settings unless mod says otherwise, which counts the list pages
// it reads. The call for the key is made at t0 + 100 ms and ends at t0 +
// 200 ms (until); t0 is when the journal first saw the key (since).
type busyShop struct {
	srv          *sbyk.Server
	a            *yookassa.Adapter
	pages        atomic.Int32
	onPage       atomic.Pointer[func(int32)] // called with each page's number
	now          atomic.Int64
	since, until time.Time
}

func (b *busyShop) clock() time.Time { return time.Unix(0, b.now.Load()).UTC() }
func (b *busyShop) set(t time.Time)  { b.now.Store(t.UnixNano()) }

// newBusyShop makes the call for op (fault injected in front of it) amid
// the shop's traffic and returns the shop, its clock at the end of the
// traffic, and the call's error.
func newBusyShop(t *testing.T, op operation.Operation, fault *sandbox.Fault, mod func(*yookassa.Config)) (*busyShop, error) {
	t.Helper()
	b := &busyShop{}
	cfg := yookassa.Config{}
	if mod != nil {
		mod(&cfg)
	}
	cfg = cfg.WithDefaults()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	first, last := t0.Add(-cfg.LookupSkew-time.Minute), t0.Add(cfg.LookupSkew+cfg.LookupLate+time.Minute)
	b.set(first)
	b.srv = sbyk.New(sbyk.Options{Options: sandbox.Options{Clock: b.clock}})
	_, err := b.srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.srv.Close() })
	b.a = front(t, b.srv, func(c *yookassa.Config) {
		c.Clock, c.Timeout = b.clock, yookassa.DefaultTimeout
		if mod != nil {
			mod(c)
		}
	}, func(r *http.Request) {
		if r.Method == http.MethodGet {
			n := b.pages.Add(1)
			if f := b.onPage.Load(); f != nil {
				(*f)(n)
			}
		}
	})
	history := func(from, to time.Time) {
		require.NoError(t, b.srv.History(int(to.Sub(from)/time.Second*shopRate), from, to))
	}
	history(first, t0.Add(99*time.Millisecond))
	b.since, b.until = t0, t0.Add(200*time.Millisecond)
	b.set(t0.Add(100 * time.Millisecond))
	if fault != nil {
		require.NoError(t, b.srv.InjectFault(*fault))
	}
	_, callErr := b.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: b.since}), op)
	b.srv.ClearFaults()
	history(b.until.Add(time.Millisecond), last)
	b.set(last)
	return b, callErr
}

// lookup is one reconcile round: the worker's attempt (first sight and
// the end of the calls) and the key alone.
func (b *busyShop) lookup(t *testing.T, op operation.Operation, number int) (adapters.LookupResult, int) {
	t.Helper()
	b.pages.Store(0)
	lr, err := b.a.Lookup(adapters.WithAttempt(roundCtx(t), adapters.Attempt{Number: number, Since: b.since, Until: b.until}), keyOnly(op))
	require.NoError(t, err)
	return lr, int(b.pages.Load())
}

// ledgerObject is the id of the one payment the ledger holds for key.
func ledgerObject(t *testing.T, srv *sbyk.Server, key string) string {
	t.Helper()
	id := ""
	for _, e := range srv.Ledger().Effects() {
		if e.Key == key {
			require.Empty(t, id, "a second payment for %s", key)
			id = e.ObjectID
		}
	}
	require.NotEmpty(t, id, "no payment for %s", key)
	return id
}

// roundCtx bounds one lookup round of the busy shop: up to
// DefaultLookupMaxPages pages of 100 payments, each page a request the
// race-built emulator answers from ~50,000 payments. The bound only keeps a
// hung round from hanging the test; it is no timing assertion, so it is
// far above what a quiet machine needs (about a second) and above what a
// loaded one took (over 20 s, seen with a load average of 17 on two cores).
func roundCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

// windowPages is how many pages of 100 the shop's traffic fills over the
// window a lookup of the busy shop's key must read to say "not found":
// LookupSkew before the first sight to LookupSkew + LookupLate after the
// calls' end.
func windowPages(skew, late time.Duration) int {
	span := skew + 200*time.Millisecond + skew + late
	return int(span/time.Second*shopRate)/100 + 1
}

// A charge whose answer was lost, in a shop taking 50 payments a second:
// the lookup starts where the calls ran and finds the payment in its first
// pages, however many payments the clock skew's margin and the minutes
// since hold (about 50,000 here; before, every round read the 20 pages
// from the window's top, met none of them, and stayed indeterminate). The
// payment is the operation's: succeeded, one charge in the ledger.
func TestLostAnswerSettlesAtShopRate(t *testing.T) {
	t.Parallel()
	op := charge(adaptertest.Intent("lost-at-rate"), "pm-saved-1", 4200, "RUB")
	b, err := newBusyShop(t, op, &sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}, nil)
	adaptertest.RequireClass(t, err, adapters.ReconcileBeforeRetry, "")

	lr, pages := b.lookup(t, op, 2)
	require.Equal(t, adapters.Found, lr.Status, "the first round settles it")
	require.Equal(t, yookassa.StatusSucceeded, lr.Outcome.BusinessStatus)
	require.Equal(t, ledgerObject(t, b.srv, ledgerKey(op)), lr.Outcome.ObjectID)
	require.Empty(t, lr.Outcome.Duplicates)
	require.LessOrEqual(t, pages, 2, "the calls' own seconds first")
	require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))
}

// A charge that was never made (a gateway in front of YooKassa answered
// 502 and the request went no further), in a shop taking 50 payments a
// second: "not found" needs the whole window read, about 330 pages with
// the defaults. Each round reads its 100 pages and the next goes on where
// it stopped, so the lookup settles in four rounds with every page read
// once (before, each round read the same 20 pages again, for ever). The
// window ends LookupLate after the calls: the payments of the minutes
// after it are never read. Retried with the same key the charge is made
// once, and found by the next lookup.
func TestNeverMadeChargeSettlesAtShopRate(t *testing.T) {
	t.Parallel()
	op := charge(adaptertest.Intent("never-made-at-rate"), "pm-saved-1", 4200, "RUB")
	b, err := newBusyShop(t, op, &sandbox.Fault{Kind: sandbox.FaultHTTP502, Count: 1}, nil)
	require.Equal(t, adapters.CodeHTTP502, adapters.AsError(err).Code, "a gateway's 502: the worker looks it up first")
	require.Equal(t, 0, b.srv.Effects(ledgerKey(op)), "the request never reached YooKassa")

	want := windowPages(yookassa.DefaultLookupSkew, yookassa.DefaultLookupLate)
	rounds, total := 0, 0
	var lr adapters.LookupResult
	for lr.Status != adapters.NotFound {
		rounds++
		require.LessOrEqual(t, rounds, want/yookassa.DefaultLookupMaxPages+1, "settled in as many rounds as the window's pages need")
		var pages int
		lr, pages = b.lookup(t, op, 2)
		require.LessOrEqual(t, pages, yookassa.DefaultLookupMaxPages, "round %d", rounds)
		total += pages
		if lr.Status != adapters.NotFound {
			require.Equal(t, adapters.Indeterminate, lr.Status, "round %d", rounds)
			require.Equal(t, yookassa.CodeLookupIncomplete, lr.Code)
		}
	}
	require.LessOrEqual(t, total, want+2*rounds, "every page of the window read once")
	t.Logf("not found after %d rounds, %d pages (the window fills %d)", rounds, total, want)

	// The worker retries with the same key: one charge.
	out, err := b.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 2, Since: b.since}), op)
	require.NoError(t, err)
	require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))
	require.Equal(t, ledgerObject(t, b.srv, ledgerKey(op)), out.ObjectID)
	b.until = b.clock().Add(100 * time.Millisecond)
	b.set(b.until.Add(time.Second))
	lr, _ = b.lookup(t, op, 3)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
}

// Where a connector that drops the key is declared, one key may have made
// several payments, so a lookup reads the calls' window from its top for
// the oldest: at 50 payments a second (here with a 2-minute skew and
// 20-page rounds) that too is read over rounds, each going on where the
// last stopped, and the lost answer's payment is found.
func TestDeclaredConnectorLookupSettlesOverRounds(t *testing.T) {
	t.Parallel()
	op := charge(adaptertest.Intent("declared-at-rate"), "pm-saved-1", 4200, "RUB")
	const skew, perRound = 2 * time.Minute, 20
	b, err := newBusyShop(t, op, &sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1},
		func(c *yookassa.Config) { c.ConnectorDropsKey, c.LookupSkew, c.LookupMaxPages = true, skew, perRound })
	adaptertest.RequireClass(t, err, adapters.ReconcileBeforeRetry, "")
	want := windowPages(skew, 0)
	rounds := 0
	var lr adapters.LookupResult
	for lr.Status != adapters.Found {
		rounds++
		require.LessOrEqual(t, rounds, want/perRound+1)
		lr, _ = b.lookup(t, op, 2)
	}
	require.Greater(t, rounds, 1, "the calls' window is longer than a round")
	require.Equal(t, ledgerObject(t, b.srv, ledgerKey(op)), lr.Outcome.ObjectID)
	require.Empty(t, lr.Outcome.Duplicates)
	require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))
}

// A round its call timeout cuts short (YooKassa answering slower than the
// pages of a round fit in the worker's call_timeout) keeps what it read
// as well: the next rounds read only the rest, and the never-made charge
// is still "not found" with every page of its window read about once.
// (A one-minute skew and 20-page rounds: a shorter window, as many rounds.)
func TestRoundCutShortKeepsWhatItRead(t *testing.T) {
	t.Parallel()
	op := charge(adaptertest.Intent("cut-short"), "pm-saved-1", 4200, "RUB")
	const skew, perRound = time.Minute, 20
	b, err := newBusyShop(t, op, &sandbox.Fault{Kind: sandbox.FaultHTTP502, Count: 1},
		func(c *yookassa.Config) { c.LookupSkew, c.LookupMaxPages = skew, perRound })
	require.Equal(t, adapters.CodeHTTP502, adapters.AsError(err).Code)

	b.pages.Store(0)
	round, cut := context.WithCancel(roundCtx(t))
	stop := func(n int32) {
		if n == 12 {
			cut() // the worker's call timeout, twelve pages in
		}
	}
	b.onPage.Store(&stop)
	_, err = b.a.Lookup(adapters.WithAttempt(round, adapters.Attempt{Number: 2, Since: b.since, Until: b.until}), keyOnly(op))
	require.Error(t, err, "the round ended with its context")
	require.Eventually(t, func() bool { return b.a.ReadingLists() == 0 }, 10*time.Second, time.Millisecond)
	b.onPage.Store(nil)
	total := int(b.pages.Load())
	require.LessOrEqual(t, total, 13, "no read goes on for a lookup that has gone")

	want := windowPages(skew, yookassa.DefaultLookupLate)
	for rounds := 1; ; rounds++ {
		require.LessOrEqual(t, rounds, want/perRound+1)
		lr, pages := b.lookup(t, op, 2)
		total += pages
		if lr.Status == adapters.NotFound {
			break
		}
		require.Equal(t, adapters.Indeterminate, lr.Status)
	}
	require.LessOrEqual(t, total, want+8, "the pages the cut round read are not read again")
	require.Equal(t, 0, b.srv.Effects(ledgerKey(op)))
}

// While a call may still run (the worker knows no end of the calls), the
// window reaches up to each read, and a payment the call commits between
// two rounds is created at the top of what the earlier round read. A round
// keeps only what no object can join any more (read LookupSkew +
// LookupLate before it began), so the next rounds still find it.
func TestProgressNeverHidesALateCommit(t *testing.T) {
	t.Parallel()
	op := charge(adaptertest.Intent("late-commit"), "pm-saved-1", 4200, "RUB")
	b, err := newBusyShop(t, op, &sandbox.Fault{Kind: sandbox.FaultHTTP502, Count: 1}, func(c *yookassa.Config) {
		c.LookupSkew, c.LookupLate, c.LookupMaxPages = 10*time.Second, 10*time.Second, 20
	})
	require.Equal(t, adapters.CodeHTTP502, adapters.AsError(err).Code)
	open := func() adapters.LookupResult {
		lr, err := b.a.Lookup(adapters.WithAttempt(roundCtx(t), adapters.Attempt{Number: 1, Since: b.since}), keyOnly(op))
		require.NoError(t, err)
		return lr
	}
	// The calls' first 50 seconds (25 pages), then the top of the rest:
	// two rounds reach the newest payments.
	for range 2 {
		require.Equal(t, adapters.Indeterminate, open().Status)
	}
	out, err := b.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: b.since}), op)
	require.NoError(t, err, "the call that was still running commits now")
	var lr adapters.LookupResult
	for rounds := 0; lr.Status != adapters.Found; rounds++ {
		require.Less(t, rounds, 10)
		lr = open()
		require.NotEqual(t, adapters.NotFound, lr.Status, "the late payment is not hidden by what an earlier round read")
	}
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
	require.Equal(t, 1, b.srv.Effects(ledgerKey(op)))
}
