package operation

import "github.com/idemgate/idemgate/redact"

// MaskText is the one masking rule for text a command carries, whichever
// face it came through: redact.String, so a card number keeps its first six
// and last four digits and everything else redact.Detect finds (sk_live_…
// and other token formats, JWTs, credentials, secret name=value pairs, long
// random runs) becomes "[REDACTED]". Afterwards redact.Detect finds nothing,
// and MaskText(MaskText(s)) == MaskText(s).
//
// The decoder applies it to every free-text field (Field.FreeText) before
// the field's length is checked, so the target receives masked text from any
// producer, and the gateway's faces (HTTP API, MCP), which publish the
// command as decoded, put only masked text into the commands stream. Ingest
// applies it to every string it maps from a webhook body. Every other string
// field is screened instead: a card number or a secret in it is refused.
func MaskText(s string) string { return redact.String(s) }
