package worker

import (
	"slices"
	"sync"
	"time"

	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/journal"
)

// Copies of a command (a redelivery, the same intent under another event
// id) often arrive while this worker is still working on their key: the
// claim says InProgress and names no wait that would end sooner than the
// work. Sent back to JetStream they would return after the retry policy's
// delay (NextRetry, 250–750 ms at first by default, growing each time), and
// their agents would wait that long for a result already in the journal.
//
// A copy whose key this worker owns (a delivery of it claimed Execute or
// Reconcile and is not settled yet) waits here instead: it is answered
// pending at once, kept alive by the heartbeats like any held command, and
// claimed again the moment the owning delivery settles — replayed from the
// journal when the work ended in a result, or decided afresh when it did
// not (an unknown outcome, a hand-off), exactly as a redelivery would be.
// Only copies of keys owned here wait, so a copy never waits on work that
// another replica does or that no delivery holds. At most half of
// MaxInFlight copies wait at once; the others go back to JetStream as
// before, so copies can never take every slot from the commands they wait
// on.
//
// A copy's claim can come back InProgress just after the owner here
// settled (the claim was on its way meanwhile): the room remembers when
// each key's last owner left, for a while, and such a copy is claimed
// again at once instead of going back to JetStream.
//
// No wait is open-ended. A copy waits at most waitBound (a call plus its
// lookup) in all, counted from when it first sat down; then it is claimed
// again, and if the key is still held it goes back to JetStream like any
// copy that found its key held. And a delivery that owned its key and
// then finds it held (its retry's re-claim met another owner, a lookup's
// re-claim did) gives its ownership up before it decides: it never waits
// for its own settle, which could not come while it waits.
type waitingRoom struct {
	mu     sync.Mutex
	keys   map[string]*keyWork
	parked int
	max    int
	// left: when the last owner of a key settled, in two generations
	// (the older dropped every leftFor), so the memory stays bounded.
	left, leftBefore map[string]time.Time
	rotated          time.Time
}

// leftFor is how long the room remembers that a key's owner left: far
// longer than a claim's round trip, and short, since every settled key is
// written down (two generations of it are kept). A claim slower than that
// only loses the shortcut: its copy comes back after the usual delay.
const leftFor = 2 * time.Second

// keyWork is what this worker does for one key: how many of its
// deliveries own it (more than one only when a lease was taken over from a
// stalled call of its own) and the copies waiting for them.
type keyWork struct {
	owners  int
	waiting []*waiter
}

type waiter struct {
	j     *job
	beat  *leaseEntry
	timer *time.Timer // ends the wait at the job's waitUntil
}

// waitBound is how long a copy waits in all for this worker's delivery
// that owns its key: the owner's call plus its lookup.
func (w *Worker) waitBound() time.Duration { return 2 * w.cfg.CallTimeout }

func newWaitingRoom(maxInFlight int) *waitingRoom {
	return &waitingRoom{keys: map[string]*keyWork{}, max: max(1, maxInFlight/2),
		left: map[string]time.Time{}, leftBefore: map[string]time.Time{}, rotated: time.Now()}
}

// ownerLeft records, under mu, that key's last owner settled now.
func (room *waitingRoom) ownerLeft(key string) {
	now := time.Now()
	if now.Sub(room.rotated) > leftFor {
		room.leftBefore, room.left, room.rotated = room.left, map[string]time.Time{}, now
	}
	room.left[key] = now
}

// leftAfter reports, under mu, whether key's last owner settled after t.
func (room *waitingRoom) leftAfter(key string, t time.Time) bool {
	at, ok := room.left[key]
	if !ok {
		at, ok = room.leftBefore[key]
	}
	return ok && at.After(t)
}

// own records that j works its key until its delivery settles or it gives
// the key up (disown); then the copies waiting for it are claimed again. A
// job owns its key once, however often it is dispatched.
func (w *Worker) own(j *job) {
	key := j.op.Key.String()
	room := w.waiting
	room.mu.Lock()
	if j.owns {
		room.mu.Unlock()
		return
	}
	j.owns = true
	hook := !j.hooked
	j.hooked = true
	kw := room.keys[key]
	if kw == nil {
		kw = &keyWork{}
		room.keys[key] = kw
	}
	kw.owners++
	room.mu.Unlock()
	if hook {
		j.d.OnSettled(func() { w.disown(j) })
	}
}

// disown ends j's ownership of its key, if it owns it, and hands the
// copies that waited for it to a claim round of their own. It reports
// whether j owned the key.
func (w *Worker) disown(j *job) bool {
	key := j.op.Key.String()
	room := w.waiting
	room.mu.Lock()
	if !j.owns {
		room.mu.Unlock()
		return false
	}
	j.owns = false
	kw := room.keys[key]
	if kw == nil {
		room.mu.Unlock()
		return true
	}
	kw.owners--
	ws := kw.waiting
	kw.waiting = nil
	room.parked -= len(ws)
	if kw.owners <= 0 {
		delete(room.keys, key)
		room.ownerLeft(key)
	}
	room.mu.Unlock()
	if len(ws) == 0 {
		return true
	}
	jobs := make([]*job, len(ws))
	for i, x := range ws {
		x.timer.Stop()
		w.beats.untrack(x.beat)
		jobs[i] = x.j
	}
	go w.claimAndDispatch(jobs)
	return true
}

// wait parks j, a copy whose claim said InProgress, behind the delivery of
// this worker that owns its key, and tells its agent the outcome is being
// settled. It reports false (nothing done) when no delivery here owns the
// key, the room is full or j has waited its waitBound already. The pending
// answer goes out before j can be claimed again, so that it never follows
// j's result; were the owner to settle meanwhile, j is claimed again at
// once.
func (w *Worker) wait(j *job) bool {
	key := j.op.Key.String()
	now := time.Now()
	if j.waitUntil.IsZero() {
		j.waitUntil = now.Add(w.waitBound())
	}
	if !now.Before(j.waitUntil) && !crashpoint.Broken(crashpoint.UnboundedWait) {
		return false // waited long enough: back to JetStream
	}
	room := w.waiting
	room.mu.Lock()
	if kw := room.keys[key]; kw == nil || kw.owners <= 0 {
		again := room.leftAfter(key, j.claimSent)
		room.mu.Unlock()
		if again {
			// The owner settled while this claim was on its way.
			go w.claimAndDispatch([]*job{j})
		}
		return again
	}
	if room.parked >= room.max {
		room.mu.Unlock()
		return false
	}
	room.parked++ // the place is taken now; the pending answer is sent unlocked
	room.mu.Unlock()
	w.m.waited.Inc()
	j.d.Tell(w.pendingResult(j, j.claim.Record))
	beat := w.beats.track(j, key, 0)
	room.mu.Lock()
	if kw := room.keys[key]; kw != nil && kw.owners > 0 {
		x := &waiter{j: j, beat: beat}
		bound := time.Until(j.waitUntil)
		if crashpoint.Broken(crashpoint.UnboundedWait) {
			bound = 1<<63 - 1
		}
		x.timer = time.AfterFunc(bound, func() { w.waitEnded(kw, x) })
		kw.waiting = append(kw.waiting, x)
		room.mu.Unlock()
		return true
	}
	room.parked--
	room.mu.Unlock()
	w.beats.untrack(beat)
	go w.claimAndDispatch([]*job{j})
	return true
}

// waitEnded takes x out of kw's waiting room when its waitBound has
// passed with the owner still at work, and claims it again: the claim
// decides afresh, and a key still held sends it back to JetStream. A
// waiter already handed to a claim round by its owner's settle is left
// alone.
func (w *Worker) waitEnded(kw *keyWork, x *waiter) {
	room := w.waiting
	room.mu.Lock()
	i := slices.Index(kw.waiting, x)
	if i < 0 {
		room.mu.Unlock()
		return
	}
	kw.waiting = slices.Delete(kw.waiting, i, i+1)
	room.parked--
	room.mu.Unlock()
	w.m.waitsEnded.Inc()
	w.beats.untrack(x.beat)
	w.claimAndDispatch([]*job{x.j})
}

// claimAndDispatch claims jobs in one round trip and acts on each decision.
func (w *Worker) claimAndDispatch(jobs []*job) {
	reqs := make([]journal.ClaimRequest, len(jobs))
	for i, j := range jobs {
		reqs[i] = w.claimRequest(j.op)
	}
	w.claimBatch(jobs, reqs)
}
