// Package coordinator runs business processes (package process): it
// consumes process commands (idemgate.proc.<name>, its own durable
// consumer), and drives each process through its steps by sending each step
// and each compensation as an ordinary keyed command
// (idemgate.cmd.<operation>, its key derived from the process's), which the
// workers execute on the usual path — claim, lease, fencing, lookup before
// any retry — so that each keeps one effect. It sits beside the worker,
// never inside it: it reads the steps' outcomes from the journal and from
// their results, and writes only the process record (journal.ProcessStore),
// under the process's own lease and fencing token.
//
// A process command is the process's owner: it stays unacknowledged in
// JetStream, its input with it, until the process is at rest and its
// result published. A coordinator that waits too long for a step brings the
// command back later (a nak); one that dies leaves it to be redelivered
// after AckWait, and the next coordinator takes the process over once its
// lease has run out, resuming from the step the journal names. A step's
// row that is already final is never sent again, and one that is unknown
// is left to the workers' reconciliation (lookup by key) before anything is
// decided: the coordinator compensates only steps the journal says
// succeeded, and only after a later step ended failed_final.
//
// It imports process, journal, operation, consumer (the Router and
// Delivery), producer (to send step commands), wire and internal
// (crashpoint, startstop); never worker, adapters, ingest, the gateway or
// cmd.
package coordinator
