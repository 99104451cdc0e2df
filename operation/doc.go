// Package operation is idemgate's domain: the command envelope and its strict
// decoder, the operation key, the canonical fingerprint (RFC 8785 JCS and
// SHA-256) and the registry of operation types with their significant fields.
//
// A command names one business intent. Decoder.Decode turns its body into an
// Operation: the key <env>:<operation>:<intent_id>:<key_version> that every
// retry of the intent shares, the normalised significant fields (money as
// int64 minor units, currency upper case, times in UTC, transport fields
// dropped) and their Fingerprint. Same key with another fingerprint is a
// conflict, never a replay. Bad input is a *DecodeError with a stable code and
// a message that names fields but never quotes values.
//
// One canonical writer serves production: Decode scans the body once
// (jsonscan.go, whose top comment gives the measured reason for a
// hand-written scanner) and writes the RFC 8785 form of the normalised
// values with appendCanonical, the same writer the field digests use. A
// general JSON canonicaliser lives only in the tests, as a reference held to
// gowebpki/jcs.
//
// Types declared in configuration (TypeDecl, RegistryWith) sit beside the
// built-in ones with the same rules, adding the enum and object kinds,
// insignificant fields (Operation.Extra, outside the fingerprint) and free
// text, which must be insignificant; unsafe declarations are
// ErrUnsafeType.
//
// Everything here is pure and deterministic: no I/O, no clock, no logging.
//
// Keys, ids and every string field that is not free text are screened for
// secrets by redact.Detect, the one detector that also masks logs, results
// and webhook text, so what a key refuses and what a log masks cannot drift
// apart; free text is masked by MaskText, the rule every face applies.
//
// Imports: the standard library and idemgate's redact (itself standard
// library only). Every other idemgate package may import this one; it
// imports no other.
package operation
