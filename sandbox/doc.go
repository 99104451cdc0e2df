// Package sandbox is the framework for faithful HTTP emulators of idemgate's
// target systems (1C, Bitrix24, amoCRM, YooKassa, T-Bank, Stripe, and in
// generic any target declared in the configuration). An emulator
// keeps its target's contract (paths, headers, JSON shapes, error bodies,
// idempotency behaviour, rate limits); this package gives every emulator the
// same three things on top:
//
//   - a Ledger of real effects: every object the emulated target creates is
//     recorded with the operation key the client sent, so tests prove a
//     guarantee by counting effects (Core.Effects, Core.TotalEffects), not by
//     comparing responses;
//   - faults on demand (Fault): lost response after commit (hang or close),
//     delay, 429 with Retry-After, 502/503, connection reset before processing
//     or after commit, a connector that ignores the key, garbage or truncated
//     bodies. A fault applies to the next N matching requests, to a seeded
//     random share of them, or to all of them until cleared;
//   - an admin HTTP API under /_sandbox/ (ledger, faults, reset) with the same
//     operations as Go methods for tests.
//
// An emulator package builds its contract handler and wraps it with NewCore;
// its Server type embeds *Core, so Handler, Start, Close, Effects,
// TotalEffects, InjectFault, ClearFaults and Reset are promoted, and it is a
// Target. A Group starts and stops a list of Targets together; whoever
// needs emulators lists them explicitly (the binary's in
// cmd/idemgate/internal/sandboxes), nothing registers itself.
//
// Writing an emulator:
//
//	type Server struct{ *sandbox.Core; ... }
//
//	func New(opts Options) *Server {
//		s := &Server{...}
//		s.Core = sandbox.NewCore(sandbox.Spec{
//			Name:       "mytarget",
//			Handler:    http.HandlerFunc(s.serve),
//			Classify:   s.classify,   // which requests create objects
//			WriteError: s.writeError, // target-shaped bodies for injected 429/5xx
//			OnReset:    s.resetState,
//		}, opts.Options)
//		return s
//	}
//
// What emulators share in serving a contract is here once (http.go): bodies
// in and out (ReadBody, WriteJSON, WriteBody for a stored answer), the
// credential checks (BasicAuthorized, BearerToken, SameSecret), and paging
// (QueryLimit, Cursor, Page). Core sets Retry-After on injected 429/503
// before the emulator's WriteError writes the target's body.
//
// Inside the contract handler, call Core.Record for every created object and
// KeyIgnored(r.Context()) to learn whether the ignore-key connector fault is
// active for this request (the emulator must then behave as if no key had
// been sent).
//
// Imports: the standard library only. It must not import adapters, worker or
// any other idemgate package; emulator subpackages import this one.
package sandbox
