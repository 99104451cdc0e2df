// Package consumer is idemgate's JetStream side: it consumes. It sets up
// the commands and results streams and the durable pull consumer shared by
// every replica (Ensure), and moves commands between JetStream and the
// worker:
//
//   - Router fetches whole batches into in-flight slots (worker.max_in_flight)
//     and hands each batch to its handler;
//   - Delivery is one fetched command: its body, subject, headers and
//     delivery count, InProgress for heartbeats, and exactly one way to end
//     it — Answer (publish the result, ack once JetStream acknowledged it),
//     AnswerThenNak (publish a pending result, come back later), Reject
//     (publish the rejected result, then terminate) or Nak (with a delay);
//   - the result publisher publishes asynchronously, waits for PubAcks in
//     publish order (bounded by PubAckTimeout) and sends the result to the
//     command's reply subject too; PublishResult publishes one synchronously.
//
// The handler decides; the Router owns acknowledgement: nothing is acked
// before its result is durably published. Subjects, headers and the result
// Nats-Msg-Id come from wire.
//
// It imports operation, wire, internal/crashpoint (soak builds' crash
// points), internal/telemetry (trace context in headers) and nats.go;
// never journal, worker, adapters or the faces.
package consumer
