// The reply subscriptions: a call's own reply subject, and the watch on a
// key's results that lets a retried call hear the original's outcome.

package gateway

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// await registers a call waiting on its own reply subject.
func (g *Gateway) await() (string, chan operation.Result) {
	token := strconv.FormatUint(g.seq.Add(1), 36)
	ch := make(chan operation.Result, 8)
	g.mu.Lock()
	g.replies[token] = ch
	g.mu.Unlock()
	return token, ch
}

func (g *Gateway) forget(token string) {
	g.mu.Lock()
	delete(g.replies, token)
	g.mu.Unlock()
}

// onReply hands a result sent to a reply subject to the call waiting on it.
func (g *Gateway) onReply(m *nats.Msg) {
	token := m.Subject[len(g.inbox)+1:]
	g.mu.Lock()
	ch := g.replies[token]
	g.mu.Unlock()
	if ch == nil {
		return
	}
	var r operation.Result
	if json.Unmarshal(m.Data, &r) != nil {
		return
	}
	select {
	case ch <- r:
	default: // pending results filled it; a final one still has room below
		if r.Status != operation.ResultPending {
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- r:
			default:
			}
		}
	}
}

// watchKey follows the results of one key; stop ends it.
func (g *Gateway) watchKey(opType, key string) (chan operation.Result, func(), error) {
	ch := make(chan operation.Result, 1)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil, errors.New("gateway closed")
	}
	w := g.watches[opType]
	if w == nil {
		w = &watch{keys: map[string]map[chan operation.Result]struct{}{}}
		sub, err := g.nc.Subscribe(wire.ResultSubject(opType), func(m *nats.Msg) { g.onWatched(opType, m) })
		if err != nil {
			g.mu.Unlock()
			return nil, nil, err
		}
		w.sub = sub
		g.watches[opType] = w
	}
	if w.keys[key] == nil {
		w.keys[key] = map[chan operation.Result]struct{}{}
	}
	w.keys[key][ch] = struct{}{}
	w.n++
	g.mu.Unlock()
	stop := func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(w.keys[key], ch)
		if len(w.keys[key]) == 0 {
			delete(w.keys, key)
		}
		w.n--
		if w.n == 0 && g.watches[opType] == w {
			delete(g.watches, opType)
			_ = w.sub.Unsubscribe()
		}
	}
	// The subscription must be in place at the server before the journal
	// is read, or a result published in between would be missed.
	if err := g.nc.Flush(); err != nil {
		stop()
		return nil, nil, err
	}
	return ch, stop, nil
}

// onWatched wakes the calls following a result's key.
func (g *Gateway) onWatched(opType string, m *nats.Msg) {
	key := m.Header.Get(wire.HeaderOperationKey)
	var r operation.Result
	if key == "" {
		if json.Unmarshal(m.Data, &r) != nil {
			return
		}
		key = r.OperationKey
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.watches[opType]
	if w == nil {
		return
	}
	for ch := range w.keys[key] {
		select {
		case ch <- r:
		default:
		}
	}
}
