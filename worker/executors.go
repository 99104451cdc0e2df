package worker

import "time"

// executorIdle is how long an executor waits for its next call before it
// ends.
const executorIdle = 10 * time.Second

// goExecute runs execute(j) on an executor: an idle one when there is one,
// else a new one. An executor's goroutine outlives its call and takes the
// next: its stack, grown once to the size a call takes (growStack), is
// kept, where a goroutine per call would allocate one, grow it and free it
// again for every call (the runtime's stack growth and goroutine start were
// ~6 % of the daemon's CPU with an HTTP target). Executors end after
// executorIdle without a call, and when the worker's work ends (Stop).
func (w *Worker) goExecute(j *job) {
	select {
	case w.execs <- j:
	default:
		go w.executor(j)
	}
}

func (w *Worker) executor(j *job) {
	growStack(0)
	idle := time.NewTimer(executorIdle)
	defer idle.Stop()
	for n := 0; j != nil; n++ {
		w.execute(j)
		idle.Reset(executorIdle)
		j, _ = w.await(idle, n)
	}
}

// await waits for an executor's next call: nil when it should end. Its
// frame keeps over a quarter of the grown stack in use while it waits, so
// that the GC, which halves the stacks of goroutines using less, leaves an
// idle executor's stack at the size its next call needs.
//
//go:noinline
func (w *Worker) await(idle *time.Timer, n int) (*job, byte) {
	var pad [stackPad / 2]byte
	pad[n&(len(pad)-1)] = byte(n) // an index unknown at compile time keeps the frame
	select {
	case j := <-w.execs:
		return j, pad[(n*7)&(len(pad)-1)]
	case <-idle.C:
	case <-w.work.Done():
	}
	return nil, 0
}
