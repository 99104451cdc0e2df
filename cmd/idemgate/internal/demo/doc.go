// Package demo is the scripted scenario behind `idemgate demo`: acting as an
// agent, it sends commands for a payment, an invoice (1C) and a CRM task to a
// running idemgate over NATS, with duplicates, redeliveries, a lost response,
// a payload conflict, two replicas racing and faults injected into the
// sandbox emulators; it counts the effects in the emulators' ledgers and the
// attempts in the journal, and judges every guarantee pass or fail in a
// closing table. One scenario plays an agent that speaks MCP instead of
// NATS, through the gateway's tools, and follows their next_action.
//
// Only the binary uses it, hence its place under cmd/idemgate/internal. The
// daemon itself is started by cmd/idemgate (Runtime carries what the
// scenarios need: the NATS URL, the journal for reading attempts, the
// emulators and a way to start a second replica), so this package holds no
// configuration loading.
//
// It imports producer, wire (subject names), journal (read only),
// operation, adapters (error codes only), gateway and gateway/mcp (with the
// MCP SDK's client), sandbox and the three emulators it drives; never
// worker, nor the binary's own package.
package demo
