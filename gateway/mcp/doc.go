// Package mcp is the gateway's Model Context Protocol face, on the official
// Go SDK (github.com/modelcontextprotocol/go-sdk): one tool per registered
// operation type (payment.charge → payment_charge), its input schema built
// from the operation registry (intent_id, approval_id, the type's fields:
// money as integer minor units, currency codes, date and time formats), its
// description teaching the key discipline, and annotations (idempotentHint;
// destructiveHint for money movement; openWorldHint); plus get_operation and
// list_unresolved, read-only, from the journal.
//
// Every tool answers with gateway.Answer as structured content and the same
// JSON as text; isError is set for rejected, conflict and failed_final. The
// server runs over stdio (`idemgate mcp`) or Streamable HTTP (Handler, at
// /mcp, with a bearer token): revision 2026-07-28 statelessly, the earlier
// ones with initialize and sessions, chosen per request (http.go).
//
// For a client that declares the Tasks extension (io.modelcontextprotocol/
// tasks), a call still pending after Options.TaskWait answers with a task
// named by the operation key, and tasks/get, tasks/update and tasks/cancel
// are served (tasks.go): built on the SDK's middleware and custom methods,
// since the SDK carries no type of the extension.
//
// Imports: gateway, operation, redact and internal/telemetry (and the SDK);
// never worker, consumer, adapters or cmd.
package mcp
