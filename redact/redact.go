package redact

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
)

// Placeholder replaces every redacted value.
const Placeholder = "[REDACTED]"

// secretSubstrings mark a key as secret when its lower-cased form, with '-',
// '_', '.' and spaces removed, contains one of them.
var secretSubstrings = []string{
	"token", "secret", "password", "passwd", "passphrase", "authorization",
	"apikey", "accesskey", "privatekey", "credential", "cookie",
	"cvv", "cvc", "cardnumber", "signature",
}

// secretWords mark a key as secret when one of its words (split on
// non-letters and camelCase) equals one of them; they are too short to match
// as substrings ("pan" is in "company").
var secretWords = []string{"pan", "pin", "auth", "otp", "cvn", "card", "pwd", "sid"}

// notSecret are names that contain a secret word but hold no secret: the
// journal's fencing token is a counter that traces an operation.
var notSecret = map[string]bool{"lease_token": true, "fencing_token": true}

// IsSecretKey reports whether a field, header or attribute name marks its
// value as secret, case-insensitively: it contains token, secret, password,
// passwd, passphrase, authorization, api_key/apikey/api-key, access_key,
// private_key, credential(s), cookie, cvv, cvc, card_number or signature
// (ignoring '-', '_', '.' and spaces), or one of its words is pan, pin, auth,
// otp, cvn, card, pwd or sid.
func IsSecretKey(name string) bool {
	if name == "" || notSecret[strings.ToLower(name)] {
		return false
	}
	var squashed strings.Builder
	squashed.Grow(len(name))
	for _, r := range name {
		switch r {
		case '-', '_', '.', ' ':
			continue
		}
		squashed.WriteRune(unicode.ToLower(r))
	}
	sq := squashed.String()
	for _, w := range secretSubstrings {
		if strings.Contains(sq, w) {
			return true
		}
	}
	for _, word := range splitWords(name) {
		for _, w := range secretWords {
			if word == w {
				return true
			}
		}
	}
	return false
}

// splitWords splits a name into lower-case words at non-letters and at
// lower-to-upper case changes ("cardPAN" -> card, pan; "X-Auth" -> x, auth).
func splitWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// String redacts free text by the rules of Detect: card numbers are masked
// (MaskPANs) and everything else Detect finds — well-known token formats
// (sk_live_…, whsec_…, GitHub and Slack tokens), JWTs, the credential after
// "Bearer" or "Basic", the value of a name=value pair whose name IsSecretKey,
// long random-looking runs — is replaced by Placeholder. Afterwards Detect
// finds nothing in the result, and String(String(s)) == String(s).
func String(s string) string {
	if s == "" {
		return s
	}
	return MaskPANs(replaceSecrets(s))
}

// replaceSecrets replaces every non-card finding with Placeholder; findings
// that overlap are replaced as one. Every finding ends before a byte that is
// not a letter or digit (or at the end), so a placeholder, bracketed, never
// joins its neighbours into a new finding.
func replaceSecrets(s string) string {
	var spans []span
	for _, next := range textRules {
		for from := 0; ; {
			start, end, ok := next(s, from)
			if !ok {
				break
			}
			spans = append(spans, span{start, end})
			from = max(end, start+1)
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for k := 0; k < len(spans); {
		cur := spans[k]
		for k++; k < len(spans) && spans[k].start < cur.end; k++ {
			cur.end = max(cur.end, spans[k].end)
		}
		b.WriteString(s[last:cur.start])
		b.WriteString(Placeholder)
		last = cur.end
	}
	b.WriteString(s[last:])
	return b.String()
}
