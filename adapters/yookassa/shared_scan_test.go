package yookassa_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/operation"
	sbyk "github.com/idemgate/idemgate/sandbox/yookassa"
)

// heldList is an emulator behind a front that counts the list pages read
// and can hold the next one: the emulator answers it at once (the page is
// what the list held then) and the front sends that answer only once the
// test releases it, so that the test can make lookups while a read runs.
type heldList struct {
	srv     *sbyk.Server
	a       *yookassa.Adapter
	pages   atomic.Int32
	arm     atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func newHeldList(t *testing.T, skew ...time.Duration) *heldList {
	t.Helper()
	h := &heldList{srv: sbyk.New(sbyk.Options{}), held: make(chan struct{}), release: make(chan struct{})}
	_, err := h.srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.srv.Close() })
	inner := h.srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			inner.ServeHTTP(w, r)
			return
		}
		h.pages.Add(1)
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		if h.arm.CompareAndSwap(true, false) {
			close(h.held)
			<-h.release
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(ts.Close)
	h.a = adapterAt(t, h.srv, ts.URL, 10*time.Second, func(c *yookassa.Config) {
		for _, d := range skew {
			c.LookupSkew = d
		}
	})
	return h
}

type lookupAnswer struct {
	lr  adapters.LookupResult
	err error
}

// lookupAsync starts a lookup of op with the journal's first sight since
// (and the end of its calls, when until is given) and returns where its
// answer will be.
func lookupAsync(ctx context.Context, a *yookassa.Adapter, op operation.Operation, since time.Time, until ...time.Time) <-chan lookupAnswer {
	ch := make(chan lookupAnswer, 1)
	att := adapters.Attempt{Number: 2, Since: since}
	for _, u := range until {
		att.Until = u
	}
	go func() {
		lr, err := a.Lookup(adapters.WithAttempt(ctx, att), keyOnly(op))
		ch <- lookupAnswer{lr, err}
	}()
	return ch
}

// Lookups made while a read of the list runs share the next read: twenty
// lookups of keys created in the same minutes read two pages, not twenty,
// and each still finds its own payment and only it. A lookup that gives up
// while it waits gets its error at once and takes nothing from the others.
func TestConcurrentLookupsShareOneRead(t *testing.T) {
	t.Parallel()
	h := newHeldList(t)
	since := time.Now().Add(-time.Second)
	createPayments(t, h.srv, 30)
	ops := make([]operation.Operation, 21)
	ids := make([]string, len(ops))
	for i := range ops {
		ops[i] = charge(adaptertest.Intent(fmt.Sprint("shared", i)), "pm-saved-1", 100, "RUB")
		out, err := h.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), ops[i])
		require.NoError(t, err)
		ids[i] = out.ObjectID
	}

	h.arm.Store(true)
	first := lookupAsync(ctx(t), h.a, ops[0], since)
	<-h.held
	answers := make([]<-chan lookupAnswer, len(ops)-1)
	for i := 1; i < len(ops)-1; i++ {
		answers[i] = lookupAsync(ctx(t), h.a, ops[i], since)
	}
	quitting, quit := context.WithCancel(ctx(t))
	gaveUp := lookupAsync(quitting, h.a, ops[len(ops)-1], since)
	require.Eventually(t, func() bool { return h.a.WaitingLookups() == len(ops)-1 }, 10*time.Second, time.Millisecond)
	quit()
	left := <-gaveUp
	require.Error(t, left.err, "a lookup that gave up is answered by its context")
	require.Equal(t, int32(1), h.pages.Load(), "nothing read while the first read is held")

	close(h.release)
	got := []lookupAnswer{<-first}
	for i := 1; i < len(ops)-1; i++ {
		got = append(got, <-answers[i])
	}
	for i, a := range got {
		require.NoError(t, a.err, "lookup %d", i)
		require.Equal(t, adapters.Found, a.lr.Status, "lookup %d", i)
		require.Equal(t, ids[i], a.lr.Outcome.ObjectID, "lookup %d finds its own payment", i)
		require.Empty(t, a.lr.Outcome.Duplicates, "lookup %d", i)
	}
	require.Equal(t, int32(2), h.pages.Load(), "the first read, then one shared by the other nineteen")
}

// A lookup that gives up costs no read of its own. One that gives up during
// its read stops that read before its next page (three pages of payments,
// one read); one that gives up while it waits for the next read is left out
// of it (no read after the one that was running).
func TestAbandonedLookupsReadNothingMore(t *testing.T) {
	t.Parallel()
	since := time.Now().Add(-time.Second)
	execute := func(h *heldList, intent string) operation.Operation {
		op := charge(adaptertest.Intent(intent), "pm-saved-1", 100, "RUB")
		_, err := h.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), op)
		require.NoError(t, err)
		return op
	}
	idle := func(h *heldList) {
		require.Eventually(t, func() bool { return h.a.ReadingLists() == 0 }, 10*time.Second, time.Millisecond)
	}

	during := newHeldList(t)
	createPayments(t, during.srv, 250)
	op := execute(during, "gone-during")
	during.arm.Store(true)
	quitting, quit := context.WithCancel(ctx(t))
	gone := lookupAsync(quitting, during.a, op, since)
	<-during.held
	quit()
	require.Error(t, (<-gone).err, "a lookup that gave up is answered by its context")
	close(during.release)
	idle(during)
	require.Equal(t, int32(1), during.pages.Load(), "the held page, none of the two after it")

	waiting := newHeldList(t)
	kept, left := execute(waiting, "kept"), execute(waiting, "gone-waiting")
	waiting.arm.Store(true)
	first := lookupAsync(ctx(t), waiting.a, kept, since)
	<-waiting.held
	quitting, quit = context.WithCancel(ctx(t))
	gone = lookupAsync(quitting, waiting.a, left, since)
	require.Eventually(t, func() bool { return waiting.a.WaitingLookups() == 1 }, 10*time.Second, time.Millisecond)
	quit()
	require.Error(t, (<-gone).err, "a lookup that gave up is answered by its context")
	close(waiting.release)
	a := <-first
	require.NoError(t, a.err)
	require.Equal(t, adapters.Found, a.lr.Status, "the lookup that stayed is answered")
	idle(waiting)
	require.Equal(t, int32(1), waiting.pages.Load(), "no read for the lookup that left while it waited")
}

// A lookup made while a read runs is not answered from that read, which
// may have listed the objects before the lookup's own call ended: it waits
// for the next read. Here the payment of the second key is made after the
// held page was listed, and its lookup still finds it.
func TestLookupIsNotAnsweredFromAReadThatBeganBeforeIt(t *testing.T) {
	t.Parallel()
	h := newHeldList(t)
	since := time.Now().Add(-time.Second)
	early := charge(adaptertest.Intent("early"), "pm-saved-1", 100, "RUB")
	_, err := h.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), early)
	require.NoError(t, err)

	h.arm.Store(true)
	first := lookupAsync(ctx(t), h.a, early, since)
	<-h.held // the page is listed: it holds early's payment alone
	late := charge(adaptertest.Intent("late"), "pm-saved-1", 100, "RUB")
	lateOut, err := h.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), late)
	require.NoError(t, err)
	second := lookupAsync(ctx(t), h.a, late, since)
	require.Eventually(t, func() bool { return h.a.WaitingLookups() == 1 }, 10*time.Second, time.Millisecond)
	close(h.release)

	a1, a2 := <-first, <-second
	require.NoError(t, a1.err)
	require.Equal(t, adapters.Found, a1.lr.Status)
	require.NoError(t, a2.err)
	require.Equal(t, adapters.Found, a2.lr.Status, "the late payment is found by a read that began after its lookup")
	require.Equal(t, lateOut.ObjectID, a2.lr.Outcome.ObjectID)
	require.Equal(t, 1, h.srv.Effects(ledgerKey(late)))
}

// Many lookups at once, from many goroutines, of keys with and without a
// payment: each answer is what a lookup alone gives (found with its own
// payment, or not found), however the reads were shared. With the end of
// the calls known, the keys without a payment in the calls' window read
// the rest of the list too (their second part, shared as well): there a
// third of the keys find a payment committed after their calls ended, and
// the keys without one are "not found" only then.
func TestSharedReadsAnswerEachLookupAsAlone(t *testing.T) {
	t.Parallel()
	for _, withUntil := range []bool{false, true} {
		t.Run(fmt.Sprint("until=", withUntil), func(t *testing.T) {
			t.Parallel()
			h := newHeldList(t, 20*time.Millisecond)
			since := time.Now().Add(-time.Second)
			const n = 60
			ops := make([]operation.Operation, n)
			ids := make([]string, n)
			pay := func(i int) {
				out, err := h.a.Execute(adapters.WithAttempt(ctx(t), adapters.Attempt{Number: 1, Since: since}), ops[i])
				require.NoError(t, err)
				ids[i] = out.ObjectID
			}
			for i := range ops {
				ops[i] = charge(adaptertest.Intent(fmt.Sprint("many", i)), "pm-saved-1", 100, "RUB")
				if i%3 == 2 || (i%3 == 1 && !withUntil) {
					pay(i) // i%3 == 0: no payment for this key
				}
			}
			var until []time.Time
			if withUntil {
				until = append(until, time.Now())
				time.Sleep(50 * time.Millisecond) // past until + skew: the first part is a closed window
				for i := 1; i < n; i += 3 {
					pay(i) // committed after the calls ended
				}
			}
			createPayments(t, h.srv, 150) // after the calls: only the rest holds them
			var wg sync.WaitGroup
			got := make([]lookupAnswer, n)
			for i := range ops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i] = <-lookupAsync(ctx(t), h.a, ops[i], since, until...)
				}()
			}
			wg.Wait()
			for i, a := range got {
				require.NoError(t, a.err, "lookup %d", i)
				if ids[i] == "" {
					require.Equal(t, adapters.NotFound, a.lr.Status, "lookup %d", i)
					continue
				}
				require.Equal(t, adapters.Found, a.lr.Status, "lookup %d", i)
				require.Equal(t, ids[i], a.lr.Outcome.ObjectID, "lookup %d", i)
			}
			t.Logf("%d lookups read %d pages", n, h.pages.Load())
		})
	}
}
