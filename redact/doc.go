// Package redact keeps secrets and card numbers out of everything idemgate
// writes down: log lines, stored results, published results, span attributes
// and inspect output. One set of rules serves all of them:
//
//   - values under secret-looking names (IsSecretKey: token, secret,
//     password, authorization, api_key, cvv, cookie, pan, card_number, …)
//     become "[REDACTED]";
//   - card numbers (13–19 digits passing Luhn, spaces or dashes allowed) are
//     masked to their first six and last four digits (MaskPANs);
//   - bearer credentials and well-known token formats in free text are
//     removed (String).
//
// JSON and Value apply the rules to payloads and provider responses,
// ReplaceAttr and NewHandler to slog, and Secret wraps a value that must
// never be printed at all. Every function is total: invalid input gives a
// placeholder, never the input.
//
// Imports: the standard library only; any idemgate package may import it.
package redact
