// Package console is idemgate's operator console: server-rendered pages
// (html/template, embedded, no JavaScript needed) on the admin listener
// under /ui/. It shows what the journal keeps — operations, their attempts,
// the unknown outcomes raised for review, idle retries — and what
// JetStream holds, and lets an operator resolve an operation with evidence,
// through the same worker.Resolve as `idemgate resolve`.
//
// Operators log in with a token (the configuration keeps its SHA-256) or
// are named by a reverse proxy's header; sessions live in HMAC-signed
// cookies; every form carries a CSRF token derived from the session;
// resolving needs the operator role, reading the viewer role. The
// Approvals page (approvals.go) lets an approver (role approver, or an
// operator with approver: true; a viewer never) approve or deny an intent
// that waits for a person, after a confirmation step, through
// approval.Service like every other face.
//
// It imports approval, journal and operation only, and reads the journal
// through Journal (the reads it shows and journal.Browser's searches and
// counts): it is handed nothing that writes but Resolve and the approval
// service. The daemon (cmd/idemgate) hands it
// the resolve function, the JetStream reads, the replica's claim-decision
// counts and a Looker (the adapters' lookups by key, for "look up now" and
// the check of a decision before it is confirmed) as Deps.
package console
