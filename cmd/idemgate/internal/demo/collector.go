package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// collector gathers every result idemgate publishes, by event id, so that a
// scenario can wait for the final result of each command it sent.
type collector struct {
	sub *nats.Subscription

	mu      sync.Mutex
	byEvent map[string][]operation.Result
	changed chan struct{} // closed and replaced on every arrival
}

// collect subscribes to every result subject on nc.
func collect(nc *nats.Conn) (*collector, error) {
	c := &collector{byEvent: make(map[string][]operation.Result), changed: make(chan struct{})}
	sub, err := nc.Subscribe(wire.ResultPrefix+">", c.handle)
	if err != nil {
		return nil, fmt.Errorf("subscribe to results: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to results: %w", err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to results: %w", err)
	}
	c.sub = sub
	return c, nil
}

func (c *collector) close() { _ = c.sub.Unsubscribe() }

func (c *collector) handle(m *nats.Msg) {
	var r operation.Result
	if json.Unmarshal(m.Data, &r) != nil || r.EventID == "" {
		return
	}
	c.mu.Lock()
	c.byEvent[r.EventID] = append(c.byEvent[r.EventID], r)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// final returns the first non-pending result of an event, and whether
// pending results preceded it.
func (c *collector) final(eventID string) (operation.Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.byEvent[eventID] {
		if r.Status != operation.ResultPending {
			return r, true
		}
	}
	return operation.Result{}, false
}

// pending counts the pending results published for an event.
func (c *collector) pending(eventID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.byEvent[eventID] {
		if r.Status == operation.ResultPending {
			n++
		}
	}
	return n
}

// wait returns the final result of every event id, calling tick with the
// count so far on each arrival and every spin interval.
func (c *collector) wait(ctx context.Context, eventIDs []string, tick func(have, want int)) (map[string]operation.Result, error) {
	spin := time.NewTicker(120 * time.Millisecond)
	defer spin.Stop()
	out := make(map[string]operation.Result, len(eventIDs))
	missing := append([]string(nil), eventIDs...)
	for {
		c.mu.Lock()
		changed := c.changed
		c.mu.Unlock()
		still := missing[:0]
		for _, id := range missing {
			if r, ok := c.final(id); ok {
				out[id] = r
			} else {
				still = append(still, id)
			}
		}
		missing = still
		if tick != nil {
			tick(len(eventIDs)-len(missing), len(eventIDs))
		}
		if len(missing) == 0 {
			return out, nil
		}
		select {
		case <-changed:
		case <-spin.C:
		case <-ctx.Done():
			return out, fmt.Errorf("%d of %d results arrived: %w", len(out), len(eventIDs), context.Cause(ctx))
		}
	}
}
