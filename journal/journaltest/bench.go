package journaltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// Benchmarks of the journal's two hot paths, the same for every engine:
//
//	ClaimComplete: claim a batch of fresh keys and complete them as
//	succeeded, the path of every new operation;
//	Replay: claim a batch of keys that succeeded earlier, the path of every
//	redelivered command.
//
// One iteration is one batch, run by BenchOptions.Callers concurrent
// callers. ops/s counts operations (keys); allocs/operation and B/operation
// divide the allocations of the whole process, and client-cpu-ns/operation
// its CPU time (user and system), by the number of operations: the client's
// share of the work, which other load on a shared machine moves less than it
// moves elapsed time.

// BenchOptions tunes Benchmark for an engine.
type BenchOptions struct {
	// Callers is how many goroutines claim at once (the store's pool should
	// hold as many connections). Default 1.
	Callers int
	// Batches are the batch sizes measured. Default 1, 10 and 100.
	Batches []int
}

const (
	benchHash  = "28a4262860864e5110d391a4556da2ad2f539ae2f87e52871f80cb7381d86aa6"
	benchOwner = "bench-worker"
	benchTTL   = time.Minute
	// ReplayKeys is how many finished operations a Replay benchmark reads,
	// batch after batch.
	ReplayKeys = 10_000
)

var (
	benchResult = json.RawMessage(`{"business_status":"succeeded"}`)
	benchRun    atomic.Int64
)

// Benchmark runs ClaimComplete and Replay for every batch size, each on a
// store newStore makes for it (and closes with the function it returns once
// that batch size is measured). The store outlives the rounds in which Go
// sizes b.N, as the raw baselines' connections do: a store made afresh for
// each round would time empty tables and cold connections, and its figures
// could not be set beside the baselines'.
func Benchmark(b *testing.B, newStore func(b *testing.B) (journal.Store, func()), o BenchOptions) {
	if o.Callers <= 0 {
		o.Callers = 1
	}
	if len(o.Batches) == 0 {
		o.Batches = []int{1, 10, 100}
	}
	b.Run("ClaimComplete", func(b *testing.B) {
		for _, batch := range o.Batches {
			s, done := newStore(b)
			b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
				keys := BenchKeys((b.N + o.Callers) * batch)
				RunCallers(b, o.Callers, batch, func() BatchFunc { return ClaimComplete(s, keys, batch) })
			})
			done()
		}
	})
	b.Run("Replay", func(b *testing.B) {
		for _, batch := range o.Batches {
			s, done := newStore(b)
			keys := FinishedKeys(b, s, ReplayKeys)
			b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
				RunCallers(b, o.Callers, batch, func() BatchFunc { return Replay(s, keys, batch) })
			})
			done()
		}
	})
}

// BatchFunc runs batch number i of a benchmark.
type BatchFunc func(ctx context.Context, i int) error

// BenchKeys returns n fresh keys, unique in the process.
func BenchKeys(n int) []string {
	prefix := "bench:payment.charge:run" + strconv.FormatInt(benchRun.Add(1), 10) + "-"
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i) + ":v1"
	}
	return keys
}

// BenchRequest is a claim of key shaped as the worker sends it.
func BenchRequest(key string) journal.ClaimRequest {
	return journal.ClaimRequest{
		Key: key, OperationType: "payment.charge", RequestHash: benchHash, TargetSystem: "payments",
		EventID: key, ApprovalID: "appr-bench", Owner: benchOwner, LeaseTTL: benchTTL,
	}
}

// ClaimComplete claims batch i of keys (keys[i*batch:(i+1)*batch], never
// claimed before) and completes it as succeeded. One caller's function: it
// reuses its request slices.
func ClaimComplete(s journal.Store, keys []string, batch int) BatchFunc {
	reqs := make([]journal.ClaimRequest, batch)
	comps := make([]journal.Completion, batch)
	return func(ctx context.Context, i int) error {
		ks := keys[i*batch : (i+1)*batch]
		for j, k := range ks {
			reqs[j] = BenchRequest(k)
		}
		claims, err := s.Claim(ctx, reqs)
		if err != nil {
			return err
		}
		for j, c := range claims {
			if c.Decision != journal.Execute {
				return fmt.Errorf("claim %s: %s, want execute", ks[j], c.Decision)
			}
			comps[j] = journal.Completion{Key: ks[j], Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: ks[j], Result: benchResult}
		}
		errs, err := s.Complete(ctx, comps)
		if err != nil {
			return err
		}
		return errors.Join(errs...)
	}
}

// Replay claims batch i of finished keys (a window that wraps around keys)
// and checks that each replays its stored result.
func Replay(s journal.Store, keys []string, batch int) BatchFunc {
	reqs := make([]journal.ClaimRequest, batch)
	return func(ctx context.Context, i int) error {
		for j, k := range Window(keys, batch, i) {
			reqs[j] = BenchRequest(k)
		}
		claims, err := s.Claim(ctx, reqs)
		if err != nil {
			return err
		}
		for j, c := range claims {
			if c.Decision != journal.ReplaySucceeded || len(c.Record.Result) == 0 {
				return fmt.Errorf("claim %s: %s, want a replay with its result", reqs[j].Key, c.Decision)
			}
		}
		return nil
	}
}

// FinishedKeys claims and completes n keys as succeeded, in batches of 100.
func FinishedKeys(b *testing.B, s journal.Store, n int) []string {
	b.Helper()
	keys := BenchKeys(n)
	call := ClaimComplete(s, keys, 100)
	for i := 0; i*100 < n; i++ {
		if err := call(context.Background(), i); err != nil {
			b.Fatalf("populate: %v", err)
		}
	}
	return keys
}

// Window returns the keys of replay batch i.
func Window(keys []string, batch, i int) []string {
	start := (i * batch) % (len(keys) - len(keys)%batch)
	return keys[start : start+batch]
}

// RunCallers runs batches [0, b.N) on callers goroutines, after a warm-up
// of batches [b.N, b.N+callers) that fills pools and statement caches, and
// reports operations per second, client CPU and allocations per operation.
func RunCallers(b *testing.B, callers, batch int, newCaller func() BatchFunc) {
	b.Helper()
	ctx := context.Background()
	calls := make([]BatchFunc, callers)
	for i := range calls {
		calls[i] = newCaller()
	}
	if err := Drive(ctx, calls, b.N, b.N+callers); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := processCPU(b)
	b.ResetTimer()
	err := Drive(ctx, calls, 0, b.N)
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	runtime.ReadMemStats(&after)
	if err != nil {
		b.Fatal(err)
	}
	ops := float64(b.N * batch)
	b.ReportMetric(ops/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/ops, "client-cpu-ns/operation")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/ops, "allocs/operation")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/ops, "B/operation")
}

// processCPU returns the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Drive hands batches [from, to) to the callers, each on its own goroutine,
// and returns the first error (the others stop at their next batch).
func Drive(ctx context.Context, callers []BatchFunc, from, to int) error {
	var (
		next   atomic.Int64
		failed atomic.Bool
		once   sync.Once
		first  error
		wg     sync.WaitGroup
	)
	next.Store(int64(from))
	for _, call := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := call(ctx, i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
