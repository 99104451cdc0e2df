// Package answer is the one place where a journal state becomes an answer:
// its status, its next_action and its reason. Every face gives the same
// answer for the same state: the result the daemon publishes on NATS, the
// MCP tools, the HTTP API, `idemgate publish --wait`, `idemgate trace` and
// the console. The rules table (Rules) has one row per state — each
// journal status, told apart where the status alone does not say what to
// do (a cancellation, a denied or expired approval, an unknown outcome past
// review_after, a retry left idle), the process states, and the faces'
// refusals (rejected, not routed, unavailable, not found).
//
// Thresholds holds the settings the answers depend on, declared once:
// poll_after, review_after and idle_after. "Unresolved" is one rule of
// the table (Thresholds.Unresolved): an unknown outcome after review_after
// lookups, or a retryable failure idle for idle_after.
//
// answer imports journal and operation only.
package answer
