// Package wire is idemgate's wire contract, written once: the subjects
// commands and results travel on, the message headers, the default stream
// names and the rule that gives a result its Nats-Msg-Id. Everything that
// speaks to JetStream on idemgate's behalf — consumer, producer, ingest,
// gateway — takes its names from here.
//
// Header names are case-sensitive on NATS: nats.Header.Get matches the
// exact spelling, and the server's deduplication reads Nats-Msg-Id exactly.
// Every name here is already in canonical MIME form, so a header that passes
// through net/http's canonicalisation keeps its spelling; Get reads an
// exact match first and a differently-cased one (a non-Go client) second.
//
// It imports the standard library only.
package wire
