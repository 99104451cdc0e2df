// Package approval is a person's approval of an intent, bound to the
// intent's fingerprint: what the approver is shown (Display: the
// significant fields, masked; never free text or secrets), and the one
// entry every face (CLI, HTTP API, console) calls to decide (Service), which
// checks the approver's groups against the type's policy before the journal
// records the decision.
//
// It imports journal, operation and redact only.
package approval
