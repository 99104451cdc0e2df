package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemgate/idemgate/operation"
)

// FirstResult sends one payment charge and waits for its final result: the
// probe of a cold start.
func FirstResult(ctx context.Context, rt Runtime) (operation.Result, error) {
	s, err := newSession(rt, Options{}.withDefaults())
	if err != nil {
		return operation.Result{}, err
	}
	defer s.close()
	in := s.intent(opCharge, "first", chargePayload("order-1", 100))
	cmd, err := s.command(in, "first")
	if err != nil {
		return operation.Result{}, err
	}
	var row Row
	if _, err := s.publish(ctx, &row, cmd); err != nil {
		return operation.Result{}, err
	}
	res, err := s.col.wait(ctx, eventIDs(cmd), nil)
	if err != nil {
		return operation.Result{}, err
	}
	return res[cmd.EventID], nil
}

// LoadResult is what Load measured.
type LoadResult struct {
	// Operations is the number of distinct intents sent (one command each).
	Operations int
	// Succeeded counts succeeded results.
	Succeeded int
	// Effects counts payments YooKassa's sandbox created meanwhile.
	Effects int
	// Elapsed runs from the first publish to the last result.
	Elapsed time.Duration
}

// PerSecond is end-to-end operations per second.
func (l LoadResult) PerSecond() float64 {
	if l.Elapsed <= 0 {
		return 0
	}
	return float64(l.Operations) / l.Elapsed.Seconds()
}

// Load sends n distinct payment charges from publishers goroutines and
// waits for every result: end-to-end throughput through NATS, the journal
// and the YooKassa sandbox.
func Load(ctx context.Context, rt Runtime, n, publishers int) (LoadResult, error) {
	s, err := newSession(rt, Options{}.withDefaults())
	if err != nil {
		return LoadResult{}, err
	}
	defer s.close()
	publishers = max(publishers, 1)
	cmds := make([]operation.Command, n)
	for i := range cmds {
		in := s.intent(opCharge, fmt.Sprintf("load-%d", i), chargePayload(fmt.Sprintf("order-%d", i), int64(100+i)))
		if cmds[i], err = s.command(in, fmt.Sprintf("load-%d", i)); err != nil {
			return LoadResult{}, err
		}
	}
	m := mark(rt.Sandboxes.YooKassa)
	start := time.Now()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		pubErr error
		next   = make(chan operation.Command)
	)
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if _, err := s.prod.Publish(ctx, c); err != nil {
					mu.Lock()
					pubErr = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range cmds {
		next <- c
	}
	close(next)
	wg.Wait()
	if pubErr != nil {
		return LoadResult{}, pubErr
	}
	res, err := s.col.wait(ctx, eventIDs(cmds...), nil)
	out := LoadResult{Operations: n, Elapsed: time.Since(start), Effects: len(m.since())}
	for _, r := range res {
		if r.Status == operation.ResultSucceeded {
			out.Succeeded++
		}
	}
	return out, err
}
