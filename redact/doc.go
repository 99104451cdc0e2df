// Package redact keeps secrets and card numbers out of everything idemgate
// writes down: log lines, stored results, published results, commands built
// from webhooks, span attributes and inspect output, an operator's evidence
// in the journal — and out of operation keys and payload fields, which the
// operation package screens (or, for free text, masks with String) by the
// same detector. One set of rules serves all of them:
//
//   - Detect is the one detector of secret-looking content in text: card
//     numbers (13–19 digits passing Luhn, as one run or in a printed card
//     layout), well-known token formats (sk_live_…, whsec_…), JWTs, the
//     credential after "Bearer"/"Basic", values of secret name=value pairs
//     and long random-looking runs. English words are not secrets:
//     "order-token-77" holds none;
//   - String masks card numbers to their first six and last four digits
//     (MaskPANs) and replaces everything else Detect finds with
//     "[REDACTED]" (Placeholder, the one placeholder idemgate prints);
//   - values under secret-looking names (IsSecretKey: token, secret,
//     password, authorization, api_key, cvv, cookie, pan, card_number, …)
//     become "[REDACTED]" whatever they hold.
//
// JSON and Value apply the rules to payloads and provider responses,
// ReplaceAttr and NewHandler to slog, and Secret is idemgate's one type for
// a configured credential: a value that must never be printed at all. Every
// function is total: invalid input gives a placeholder, never the input.
//
// Imports: the standard library only; any idemgate package may import it.
package redact
