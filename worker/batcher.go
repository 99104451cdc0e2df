package worker

import (
	"context"
	"sync"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// committer groups completions from concurrent operations into one journal
// round trip per short window (group commit): a slow call never holds the
// others back, and a burst of fast ones shares one fsync. Up to flushers
// groups are in the journal at once; while all of them are busy the next group
// keeps filling (up to max), so a slower database gets larger groups, not a
// longer queue.
type committer struct {
	store  journal.Store
	m      *Metrics
	window time.Duration
	// quiet reports that no other completion is on its way (no call is
	// executing): a lone completion is then flushed at once, the window
	// being only for a burst. Nil: always wait the window.
	quiet    func() bool
	max      int
	in       chan commitReq
	flushing chan struct{}    // one token per group in the journal
	spare    chan []commitReq // emptied groups, for reuse
	done     chan struct{}
	once     sync.Once
}

type commitReq struct {
	c    journal.Completion
	then func(error) // called once with the completion's outcome
}

func newCommitter(store journal.Store, window time.Duration, max, flushers int, m *Metrics, quiet func() bool) *committer {
	c := &committer{store: store, m: m, window: window, quiet: quiet, max: max, in: make(chan commitReq, max),
		flushing: make(chan struct{}, flushers), spare: make(chan []commitReq, flushers+1), done: make(chan struct{})}
	go c.loop()
	return c
}

// Complete queues a completion and waits for its outcome.
func (c *committer) Complete(ctx context.Context, comp journal.Completion) error {
	res := make(chan error, 1)
	c.Submit(ctx, comp, func(err error) { res <- err })
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Submit queues a completion and returns; then is called with its outcome,
// on the goroutine that flushed its group once the journal answered (or at
// once with ctx's error when ctx ends before the completion is queued). then
// must not wait for another completion.
func (c *committer) Submit(ctx context.Context, comp journal.Completion, then func(error)) {
	select {
	case c.in <- commitReq{c: comp, then: then}:
	case <-ctx.Done():
		then(ctx.Err())
	}
}

func (c *committer) close() {
	c.once.Do(func() { close(c.in) })
	<-c.done
}

func (c *committer) loop() {
	var flushes sync.WaitGroup
	defer func() {
		flushes.Wait()
		close(c.done)
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		first, ok := <-c.in
		if !ok {
			return
		}
		var batch []commitReq
		select {
		case batch = <-c.spare:
		default:
			batch = make([]commitReq, 0, min(c.max, 64))
		}
		batch = append(batch, first)
		open := true
		// Fill for one window (none when nothing else is coming), then
		// until a flush slot is free.
		window := c.window
		if c.quiet != nil && len(c.in) == 0 && c.quiet() {
			window = 0
		}
		timer.Reset(window)
	fill:
		for open && len(batch) < c.max {
			select {
			case r, ok := <-c.in:
				if !ok {
					open = false
					break fill
				}
				batch = append(batch, r)
			case <-timer.C:
				break fill
			}
		}
		timer.Stop()
	wait:
		for {
			in := c.in
			if !open || len(batch) >= c.max {
				in = nil
			}
			select {
			case c.flushing <- struct{}{}:
				break wait
			case r, ok := <-in:
				if !ok {
					open = false
					continue
				}
				batch = append(batch, r)
			}
		}
		flushes.Add(1)
		go func() {
			defer flushes.Done()
			c.flush(batch)
		}()
		if !open {
			return
		}
	}
}

// flush sends one group, frees its flush slot for the next group, then hands
// each completion its outcome.
func (c *committer) flush(batch []commitReq) {
	comps := make([]journal.Completion, len(batch))
	for i, r := range batch {
		comps[i] = r.c
	}
	// The completion must land even while the daemon shuts down: its own
	// deadline, not the caller's.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	began := time.Now()
	errs, err := c.store.Complete(ctx, comps)
	cancel()
	c.m.batch(batchComplete, len(comps), time.Since(began))
	<-c.flushing
	for i, r := range batch {
		if err != nil {
			r.then(err)
		} else {
			r.then(errs[i])
		}
	}
	clear(batch)
	select {
	case c.spare <- batch[:0]:
	default:
	}
}
