// Package crashpoint names the points where the fault soak (e2e/soak) kills a
// daemon on purpose, and the guarantees it can break on purpose to prove that
// its checker catches each breach.
//
// Built without the `soak` build tag (every release and test build), every
// function here is a constant no-op the compiler removes: nothing reads the
// environment, nothing can crash or break. Built with `-tags soak` (only
// scripts/soak does), two environment variables are read once at start-up:
//
//	IDEMGATE_SOAK_CRASH=<point>[:<n>]  SIGKILL this process at the n-th pass
//	                                   (default 1st) through the named point
//	IDEMGATE_SOAK_BREAK=<break>        break one guarantee (see Break)
//
// It imports only the standard library: every package of the daemon may
// use it without depending on another of the project's.
package crashpoint

// Point names a place in the daemon where a crash is most telling.
type Point string

// Crash points, in the order a command passes them.
const (
	// RequestWritten: the target's request was written on the wire; its
	// response has not been read (the effect may or may not happen).
	RequestWritten Point = "request_written"
	// BeforeComplete: the target answered with success; the journal does not
	// know yet.
	BeforeComplete Point = "before_complete"
	// BeforePublish: the outcome is in the journal; its result is not
	// published yet.
	BeforePublish Point = "before_publish"
	// BeforeAck: the result was published (PubAck received); the command is
	// not acknowledged yet.
	BeforeAck Point = "before_ack"
)

// Points lists every crash point of an operation.
var Points = []Point{RequestWritten, BeforeComplete, BeforePublish, BeforeAck}

// Crash points of a business process's coordinator, in the order a step
// passes them (process/coordinator).
const (
	// ProcessBeforeStep: a step's (or compensation's) command is about to
	// be sent.
	ProcessBeforeStep Point = "process_before_step"
	// ProcessStepSettled: the journal holds the step's final outcome; the
	// process record has not moved on.
	ProcessStepSettled Point = "process_step_settled"
	// ProcessAdvanced: the process record moved on; the next step is not
	// sent yet.
	ProcessAdvanced Point = "process_advanced"
)

// ProcessPoints lists the crash points of a process's coordinator: a soak
// with a process workload crashes there too.
var ProcessPoints = []Point{ProcessBeforeStep, ProcessStepSettled, ProcessAdvanced}

// Break names a guarantee a soak build can be told to break.
type Break string

// Breaks. Each must make the soak's checker fail on its own invariant.
const (
	// NoFencing completes with whatever fencing token is current instead of
	// the caller's own, and keeps working after the lease was lost: a stale
	// owner's completion is accepted (invariant stale_completions).
	NoFencing Break = "no_fencing"
	// BlindRetry treats every lookup of an unknown outcome as "not found": the
	// call is retried without knowing whether it took effect (invariant
	// blind_retries).
	BlindRetry Break = "blind_retry"
	// AckBeforePublish acknowledges a command before its result is
	// published: a crash in between loses the result (invariant lost).
	AckBeforePublish Break = "ack_before_publish"
	// UnboundedWait lets a copy wait for the delivery owning its key
	// without a bound, and lets that owner, when its retry's re-claim
	// meets another owner, keep its ownership and wait behind itself; its
	// in-lease re-claim is also slowed by 100 ms, as a loaded machine
	// slows it, so that a copy on another replica wins the race for the
	// key. The delivery is then held for ever by its heartbeats, never
	// answered (invariant held_too_long).
	UnboundedWait Break = "unbounded_wait"
	// SkipApproval executes an intent the approval policy gates without
	// waiting for a person's approval (invariant effects_without_approval).
	SkipApproval Break = "skip_approval"
	// CompensateUnknown takes a process step whose outcome is unknown (its
	// answer was lost) for a final failure without looking it up, and
	// compensates the steps before it: the step's effect may stand while
	// the process says it was undone (invariant process_effects).
	CompensateUnknown Break = "compensate_unknown"
)

// Breaks lists every break.
var Breaks = []Break{NoFencing, BlindRetry, AckBeforePublish, UnboundedWait, SkipApproval, CompensateUnknown}

// Hit passes point p: in a soak build told to crash there, the process kills
// itself with SIGKILL (no deferred code, no flush) at the chosen pass.
func Hit(p Point) { hit(p) }

// Broken reports whether a soak build was told to break b.
func Broken(b Break) bool { return broken(b) }

// Do runs f only when a soak build was told to break b.
func Do(b Break, f func()) {
	if broken(b) {
		f()
	}
}

// Token returns the fencing token a completion carries: token itself, except
// in a soak build told to break NoFencing, where it is what current reads
// (the row's current token, so a stale owner's completion is accepted).
// current is called only then.
func Token(token int64, current func() (int64, error)) int64 {
	if !broken(NoFencing) {
		return token
	}
	if t, err := current(); err == nil {
		return t
	}
	return token
}
