package redact

import (
	"regexp"
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

var (
	// Authorization credentials after their scheme.
	authSchemeRe = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{8,})`)
	// Well-known secret token formats, replaced whole.
	tokenRe = regexp.MustCompile(`\b(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{6,}|whsec_[A-Za-z0-9+/=]{6,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*)`)
	// name=value pairs (query strings, form bodies, DSNs).
	pairRe = regexp.MustCompile(`([A-Za-z0-9_.-]+)=([^\s&"',;]+)`)
)

// looksEncoded reports whether s looks like base64 rather than a word: it
// holds a digit, '=', '+' or '/', or mixes upper and lower case.
func looksEncoded(s string) bool {
	var upper, lower bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c) || c == '=' || c == '+' || c == '/':
			return true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		}
	}
	return upper && lower
}

// String redacts free text: it masks card numbers (MaskPANs), replaces the
// credentials after "Bearer" and "Basic", well-known secret
// token formats (sk_live_…, whsec_…, GitHub and Slack tokens, JWTs) and the
// values of name=value pairs whose name IsSecretKey. String(String(s)) ==
// String(s).
func String(s string) string {
	if s == "" {
		return s
	}
	s = tokenRe.ReplaceAllString(s, Placeholder)
	s = authSchemeRe.ReplaceAllStringFunc(s, func(m string) string {
		sub := authSchemeRe.FindStringSubmatch(m)
		if strings.EqualFold(sub[1], "basic") && !looksEncoded(sub[3]) {
			return m // "basic settings": prose, not a credential
		}
		return sub[1] + sub[2] + Placeholder
	})
	if strings.IndexByte(s, '=') >= 0 {
		s = pairRe.ReplaceAllStringFunc(s, func(m string) string {
			eq := strings.IndexByte(m, '=')
			if !IsSecretKey(m[:eq]) || m[eq+1:] == Placeholder {
				return m
			}
			return m[:eq+1] + Placeholder
		})
	}
	return MaskPANs(s)
}
