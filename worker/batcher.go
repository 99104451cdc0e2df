package worker

import (
	"context"
	"sync"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// committer groups completions from concurrent operations into one journal
// round trip per short window (group commit): a slow call never holds the
// others back, and a burst of fast ones shares one fsync.
type committer struct {
	store  journal.Store
	window time.Duration
	max    int
	in     chan commitReq
	done   chan struct{}
	once   sync.Once
}

type commitReq struct {
	c   journal.Completion
	res chan error
}

func newCommitter(store journal.Store, window time.Duration, max int) *committer {
	c := &committer{store: store, window: window, max: max, in: make(chan commitReq, max), done: make(chan struct{})}
	go c.loop()
	return c
}

// Complete queues a completion and waits for its outcome.
func (c *committer) Complete(ctx context.Context, comp journal.Completion) error {
	r := commitReq{c: comp, res: make(chan error, 1)}
	select {
	case c.in <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *committer) close() {
	c.once.Do(func() { close(c.in) })
	<-c.done
}

func (c *committer) loop() {
	defer close(c.done)
	batch := make([]commitReq, 0, c.max)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		first, ok := <-c.in
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		timer.Reset(c.window)
	fill:
		for len(batch) < c.max {
			select {
			case r, ok := <-c.in:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			case <-timer.C:
				break fill
			}
		}
		timer.Stop()
		c.flush(batch)
	}
}

func (c *committer) flush(batch []commitReq) {
	comps := make([]journal.Completion, len(batch))
	for i, r := range batch {
		comps[i] = r.c
	}
	// The completion must land even while the daemon shuts down: its own
	// deadline, not the caller's.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs, err := c.store.Complete(ctx, comps)
	for i, r := range batch {
		if err != nil {
			r.res <- err
		} else {
			r.res <- errs[i]
		}
	}
}
