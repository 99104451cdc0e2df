// Package process holds idemgate's business processes as the daemon's
// configuration declares them (processes: in its file): a process is one
// intent with several effects — an invoice, a charge, a shipping task —
// run as ordered steps, each an ordinary idemgate operation with a key of
// its own, and each with an optional compensation (a new, legally
// meaningful operation: a cancelling document, a refund), run newest first
// when a later step ends in a final failure.
//
// This package compiles and checks declarations (Compile: every template
// names a known input field or an earlier step, every operation and
// compensation type exists, required fields are given, kinds agree), gives
// each compiled definition its digest (a running process finishes on the
// definition it started with; the journal keeps the declaration by
// digest), derives the keys of a process and of its steps
// (<env>:process.<name>:<intent>:<version>, and
// <env>:<step operation>:process.<name>:<intent>:<version>:<step>[:compensate]:v1),
// and builds each step's payload from the process input and the earlier
// steps' stored results (template.go). The coordinator that runs
// processes is process/coordinator.
//
// It imports operation and journal (the process record's types); never
// worker, consumer, adapters, producer or cmd.
package process
