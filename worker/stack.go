package worker

// growStack grows the calling goroutine's stack once, while it is shallow,
// to the size a call to a target takes (adapter, HTTP client, tracing,
// journal). A goroutine starts with a small stack that would otherwise
// double several times during the call, each time copying a deeper stack:
// the runtime walks and adjusts every frame it moves, which cost ~7 % of
// the daemon's CPU with an HTTP target. Called first thing on a goroutine
// that will call execute: an executor (goExecute, whose idle wait keeps the
// stack from being shrunk between calls) and a reconciliation that goes on
// to execute. The frame below makes the runtime size the stack once (to
// 16 KiB, the largest size the runtime's per-P stack caches serve) while
// only a frame or two need moving.
//
//go:noinline
func growStack(n int) byte {
	var pad [stackPad]byte
	pad[n&(stackPad-1)] = byte(n) // an index unknown at compile time keeps the frame
	return pad[(n*7)&(stackPad-1)]
}

// stackPad is growStack's frame: past 8 KiB, the stack grows to 16 KiB.
const stackPad = 8 << 10
