// Package ingest is idemgate's webhook-to-queue HTTP server: it turns each
// notification from a payment provider, CRM or 1C into at most one command on
// JetStream, so the daemon can act on it exactly once.
//
// One route per configured source, POST /webhooks/{source}. For every request
// the server, in this order:
//
//  1. checks the sender's address against the source's allow-list, if any
//     (403 when refused; X-Forwarded-For is believed only from
//     Config.TrustedProxies, by default from no one);
//  2. checks the content type (415 unless application/json) and the size
//     (413 past Config.MaxBodyBytes, read through http.MaxBytesReader);
//  3. verifies the raw body before parsing it, by the source's scheme (401
//     when it does not verify; see the schemes below);
//  4. parses the body (400 when malformed), derives a stable event id (see
//     EventID) and finds the route for the event type; an unrouted event is
//     acknowledged with 200 and counted, nothing is published;
//  5. for a re-fetching source, asks the provider for the object: 401 when
//     it does not know it (forged), 409 when its state differs from the
//     notification's (id, status, amount) so the sender retries and a
//     notification that ran ahead of the provider is taken on a later
//     delivery, 503 when the provider cannot be asked;
//  6. maps the body to the route's operation payload (422 when the mapping or
//     the resulting command does not hold, so the sender retries after the
//     configuration is fixed), masking card numbers and secrets in every
//     string taken from the body (redact.String: a card keeps its first six
//     and last four digits, a token becomes "[REDACTED]"), and publishes the
//     command envelope on idemgate.cmd.<operation> with Nats-Msg-Id =
//     event_id;
//  7. answers 200 "OK" only after JetStream acknowledged the publish — a
//     duplicate delivery inside the stream's dedup window is acknowledged too,
//     without a second message — and 503 when the publish was not
//     acknowledged, so the sender retries and nothing is lost.
//
// Schemes. "stripe": Stripe-Signature t=…,v1=…, HMAC-SHA256 over "t.body".
// "standard": Standard Webhooks webhook-id, webhook-timestamp and
// webhook-signature "v1,<base64>", HMAC-SHA256 over "id.timestamp.body" with
// the secret "whsec_<base64>". "tbank": the notification's Token, SHA-256
// over the sorted root scalar values plus the terminal Password, and its
// TerminalKey; the Token does not sign nested objects, so routes may only map
// root fields. "yookassa": no signature exists; the allow-list (YooKassa's
// published addresses by default) plus a re-fetch of the object from the
// provider (Refetcher), whose copy is the only one trusted. Several secrets
// may be active at once (rotation), signed timestamps must be within
// Source.Tolerance either way, and every comparison is constant-time.
//
// The stream's dedup window (Nats-Msg-Id) drops redeliveries within it; a
// later redelivery is published again and the daemon's journal, keyed by the
// same event id (or Route.IntentPaths), replays instead of acting twice.
//
// Counters (accepted, duplicate, unrouted, rejected{reason}) are kept in the
// Server (Stats) and exported through a Prometheus collector (WithRegisterer).
// Secrets are never logged, and neither are bodies.
//
// Imports: the standard library, nats.go's jetstream, prometheus'
// client_golang and idemgate's operation, redact, wire (subjects and
// headers), internal/startstop, internal/telemetry and
// adapters/tbank/tbanktoken (T-Bank's Token rule, which the adapter signs
// with) packages. Only cmd imports ingest.
package ingest
