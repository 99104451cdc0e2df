package coordinator

import (
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/idemgate/idemgate/wire"
)

// watcher wakes the waits for steps' outcomes: one core NATS subscription
// per operation type's results subject, each result handed by its key to
// whoever waits on that key. A wake is a hint to read the journal again,
// which alone decides; a result published while no one listened is found
// by that read (or the wait's poll).
type watcher struct {
	nc *nats.Conn

	mu     sync.Mutex
	subs   map[string]*nats.Subscription     // by operation type
	waits  map[string]map[chan struct{}]bool // by key
	closed bool
}

func newWatcher(nc *nats.Conn) *watcher {
	return &watcher{nc: nc, subs: map[string]*nats.Subscription{}, waits: map[string]map[chan struct{}]bool{}}
}

// add registers a wait for key's results on opType's results subject; the
// returned channel receives a value (without blocking) for each result.
// remove ends it.
func (w *watcher) add(opType, key string) (ch chan struct{}, remove func(), err error) {
	ch = make(chan struct{}, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ch, func() {}, nil
	}
	_, subscribed := w.subs[opType]
	if !subscribed {
		sub, err := w.nc.Subscribe(wire.ResultSubject(opType), w.onResult)
		if err != nil {
			w.mu.Unlock()
			return nil, nil, err
		}
		w.subs[opType] = sub
	}
	if w.waits[key] == nil {
		w.waits[key] = map[chan struct{}]bool{}
	}
	w.waits[key][ch] = true
	w.mu.Unlock()
	if !subscribed {
		// The subscription must reach the server before the journal is
		// read, or a result published in between would wake no one (the
		// poll still would).
		_ = w.nc.Flush()
	}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.waits[key], ch)
		if len(w.waits[key]) == 0 {
			delete(w.waits, key)
		}
	}, nil
}

func (w *watcher) onResult(m *nats.Msg) {
	key := wire.Get(m.Header, wire.HeaderOperationKey)
	if key == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waits[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
	w.subs = map[string]*nats.Subscription{}
}
