package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// heartbeats renews, in one batch per interval, the journal lease of every
// running call and the AckWait of every command held (InProgress): one
// heartbeat for both, so a command is never redelivered while its owner works.
type heartbeats struct {
	w     *Worker
	mu    sync.Mutex
	set   map[*leaseEntry]struct{}
	quit  chan struct{}
	ended chan struct{}
	once  sync.Once
}

type leaseEntry struct {
	j      *job
	key    string
	token  int64 // 0: only the command's AckWait is kept alive
	ctx    context.Context
	cancel context.CancelFunc
	// lost is set (before ctx is cancelled) when another owner took the
	// lease over.
	lost atomic.Bool
}

func newHeartbeats(w *Worker) *heartbeats {
	return &heartbeats{w: w, set: map[*leaseEntry]struct{}{}, quit: make(chan struct{}), ended: make(chan struct{})}
}

// track keeps a command's AckWait (and, with a token, its lease) alive until
// untrack. The entry's context ends at untrack, on shutdown and when the
// lease is lost.
func (h *heartbeats) track(j *job, key string, token int64) *leaseEntry {
	return h.trackCall(j, key, token, 0)
}

// trackCall is track whose context also ends after timeout (when positive):
// one context serves as both the lease's and the call's.
func (h *heartbeats) trackCall(j *job, key string, token int64, timeout time.Duration) *leaseEntry {
	var ctx context.Context
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(h.w.work, timeout)
	} else {
		ctx, cancel = context.WithCancel(h.w.work)
	}
	e := &leaseEntry{j: j, key: key, token: token, ctx: ctx, cancel: cancel}
	h.mu.Lock()
	h.set[e] = struct{}{}
	h.mu.Unlock()
	return e
}

func (h *heartbeats) untrack(e *leaseEntry) {
	h.mu.Lock()
	delete(h.set, e)
	h.mu.Unlock()
	e.cancel()
}

func (h *heartbeats) stop() {
	h.once.Do(func() { close(h.quit) })
	<-h.ended
}

func (h *heartbeats) loop() {
	defer close(h.ended)
	t := time.NewTicker(h.w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-t.C:
			h.beat()
		}
	}
}

func (h *heartbeats) beat() {
	h.mu.Lock()
	entries := make([]*leaseEntry, 0, len(h.set))
	for e := range h.set {
		entries = append(entries, e)
	}
	h.mu.Unlock()
	if len(entries) == 0 {
		return
	}
	var refs []journal.LeaseRef
	var leased []*leaseEntry
	for _, e := range entries {
		if err := e.j.d.InProgress(); err != nil {
			h.w.log.Debug("in-progress signal failed", "operation_key", e.key, "error", err.Error())
		}
		if e.token > 0 {
			refs = append(refs, journal.LeaseRef{Key: e.key, Token: e.token})
			leased = append(leased, e)
		}
	}
	if len(refs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.w.cfg.HeartbeatInterval)
	defer cancel()
	errs, err := h.w.d.Store.Heartbeat(ctx, refs, h.w.cfg.LeaseTTL)
	if err != nil {
		// The lease may still expire; fencing keeps a late completion out.
		h.w.log.Warn("lease heartbeat failed", "leases", len(refs), "error", err.Error())
		return
	}
	for i, e := range leased {
		if errs[i] != nil {
			e.lost.Store(true)
			e.cancel()
		}
	}
}
