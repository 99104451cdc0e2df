package redact

// Kind is a kind of secret the detector finds (Detect). Every rule of the
// detector is one Kind; operation keys refuse, and String masks, exactly what
// the rules find.
type Kind uint8

// Kinds, in the order Detect tries them.
const (
	// KindNone: nothing secret-looking.
	KindNone Kind = iota
	// KindCard is a payment card number: 13–19 digits passing the Luhn check,
	// either as one run of digits or as digit groups in a printed card layout
	// (4-4-4-4, 4-4-4-4-1..3, 4-4-4-1..4, 4-6-5, 4-6-4) joined by single
	// spaces, '-', '.', '_' or '~'. A run of more than 19 digits (an account
	// number) is not a card, nor are groups in another layout (a date, a
	// phone number).
	KindCard
	// KindToken is a secret in a well-known format, its prefix matched
	// case-insensitively after a non-alphanumeric byte (or at the start):
	// sk_live_, sk_test_, rk_live_, rk_test_ (Stripe), whsec_ (webhook
	// signing secrets) followed by at least one letter or digit; ghp_, gho_,
	// ghu_, ghs_, ghr_ (GitHub) followed by 20 or more; xoxa-, xoxb-, xoxp-,
	// xoxo-, xoxs-, xoxr- (Slack) followed by 10 or more.
	KindToken
	// KindJWT is a JSON Web Token: "eyJ", then at least 6 base64url bytes,
	// '.', at least 6 more, '.', and the (possibly empty) signature.
	KindJWT
	// KindCredential is the credential after "Bearer " or "Basic " (any
	// case, any run of white space): 8 or more of [A-Za-z0-9._~+/=-], and for
	// Basic only when it looks encoded (a digit, '+', '/', '=' or mixed
	// case), so that "basic settings" is prose.
	KindCredential
	// KindNamedValue is the value of a name=value pair (a query string, a
	// form, a DSN) whose name IsSecretKey: "token=abc" holds one, "id=7" not.
	KindNamedValue
	// KindRandom is a long random-looking run of ASCII letters and digits: 32
	// or more mixing upper case, lower case and digits (base62), 40 or more
	// hex digits mixing letters and digits (a hex secret or digest), or 48 or
	// more mixing letters and digits. A UUID, with or without dashes, is not
	// one; nor is a word, however long.
	KindRandom
)

// String describes the kind without quoting anything found.
func (k Kind) String() string {
	switch k {
	case KindNone:
		return "nothing secret"
	case KindCard:
		return "card-like number (13-19 digits passing the Luhn check)"
	case KindToken:
		return "secret token (a known prefix such as sk_live_ or whsec_)"
	case KindJWT:
		return "JSON Web Token"
	case KindCredential:
		return "credential after an authorization scheme"
	case KindNamedValue:
		return "value under a secret name"
	case KindRandom:
		return "long random-looking run (a token or secret?)"
	}
	return "unknown kind"
}

// Detect reports what secret-looking content s holds — of the kinds found,
// the first in the order of the Kind constants — or KindNone. It is the one
// detector behind operation key screening (a key is refused when Detect
// finds anything) and behind String (which masks card numbers and replaces
// everything else Detect finds). It allocates nothing unless s holds '='
// (name=value pairs are then checked with IsSecretKey).
func Detect[S ~string | ~[]byte](s S) Kind {
	// Each rule is called directly (not through a table of funcs) so that
	// the []byte instantiation does not convert s to a string.
	switch {
	case hasCard(s):
		return KindCard
	case found(nextToken(s, 0)):
		return KindToken
	case found(nextJWT(s, 0)):
		return KindJWT
	case found(nextCredential(s, 0)):
		return KindCredential
	case found(nextNamedValue(s, 0)):
		return KindNamedValue
	case found(nextRandom(s, 0)):
		return KindRandom
	}
	return KindNone
}

func found(_, _ int, ok bool) bool { return ok }

// A textRule finds the next match of one non-card kind at or after from,
// returning the span String replaces.
type textRule func(s string, from int) (start, end int, ok bool)

// textRules are the non-card rules, in Detect's order.
var textRules = []textRule{nextToken[string], nextJWT[string], nextCredential[string], nextNamedValue[string], nextRandom[string]}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// hasPrefixFold reports whether s[i:] starts with the lower-case ASCII word w,
// ignoring the case of s.
func hasPrefixFold[S ~string | ~[]byte](s S, i int, w string) bool {
	if len(s)-i < len(w) {
		return false
	}
	for j := 0; j < len(w); j++ {
		if lowerASCII(s[i+j]) != w[j] {
			return false
		}
	}
	return true
}

// boundary reports whether a match may start at i: at the start of s or
// after a byte that is not a letter or digit.
func boundary[S ~string | ~[]byte](s S, i int) bool { return i == 0 || !isAlnum(s[i-1]) }

// tokenPrefixes are the well-known secret formats: prefix, minimum tail of
// letters and digits (and '-' where the format has it).
var tokenPrefixes = []struct {
	prefix  string
	minTail int
	dash    bool
}{
	{"sk_live_", 1, false}, {"sk_test_", 1, false}, {"rk_live_", 1, false}, {"rk_test_", 1, false},
	{"whsec_", 1, false},
	{"ghp_", 20, false}, {"gho_", 20, false}, {"ghu_", 20, false}, {"ghs_", 20, false}, {"ghr_", 20, false},
	{"xoxa-", 10, true}, {"xoxb-", 10, true}, {"xoxp-", 10, true}, {"xoxo-", 10, true}, {"xoxs-", 10, true}, {"xoxr-", 10, true},
}

func nextToken[S ~string | ~[]byte](s S, from int) (int, int, bool) {
	for i := from; i < len(s); i++ {
		c := lowerASCII(s[i])
		if (c != 's' && c != 'r' && c != 'w' && c != 'g' && c != 'x') || !boundary(s, i) {
			continue
		}
		for _, p := range tokenPrefixes {
			if p.prefix[0] != c || !hasPrefixFold(s, i, p.prefix) {
				continue
			}
			j := i + len(p.prefix)
			for j < len(s) && (isAlnum(s[j]) || p.dash && s[j] == '-') {
				j++
			}
			if j-i-len(p.prefix) >= p.minTail {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

func isBase64URL(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

func nextJWT[S ~string | ~[]byte](s S, from int) (int, int, bool) {
	for i := from; i+3 <= len(s); i++ {
		if s[i] != 'e' || s[i+1] != 'y' || s[i+2] != 'J' || !boundary(s, i) {
			continue
		}
		j := i + 3
		ok := true
		for part := 0; part < 2 && ok; part++ {
			k := j
			for j < len(s) && isBase64URL(s[j]) {
				j++
			}
			if j-k < 6 || j >= len(s) || s[j] != '.' {
				ok = false
				break
			}
			j++
		}
		if !ok {
			continue
		}
		for j < len(s) && isBase64URL(s[j]) {
			j++
		}
		return i, j, true
	}
	return 0, 0, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isCredByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=' || c == '-'
}

func nextCredential[S ~string | ~[]byte](s S, from int) (int, int, bool) {
	for i := from; i < len(s); i++ {
		c := lowerASCII(s[i])
		if c != 'b' || !boundary(s, i) {
			continue
		}
		var basic bool
		var j int
		switch {
		case hasPrefixFold(s, i, "bearer"):
			j = i + len("bearer")
		case hasPrefixFold(s, i, "basic"):
			j, basic = i+len("basic"), true
		default:
			continue
		}
		if j >= len(s) || !isSpace(s[j]) {
			continue
		}
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		k := j
		for k < len(s) && isCredByte(s[k]) {
			k++
		}
		if k-j < 8 || basic && !looksEncoded(s[j:k]) {
			continue
		}
		return j, k, true
	}
	return 0, 0, false
}

// looksEncoded reports whether s looks like base64 rather than a word: it
// holds a digit, '=', '+' or '/', or mixes upper and lower case.
func looksEncoded[S ~string | ~[]byte](s S) bool {
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

func isNameByte(c byte) bool { return isAlnum(c) || c == '_' || c == '.' || c == '-' }

func isValueByte(c byte) bool {
	return !isSpace(c) && c != '&' && c != '"' && c != '\'' && c != ',' && c != ';'
}

func nextNamedValue[S ~string | ~[]byte](s S, from int) (int, int, bool) {
	for i := from; i < len(s); i++ {
		if s[i] != '=' {
			continue
		}
		n := i
		for n > 0 && isNameByte(s[n-1]) {
			n--
		}
		j := i + 1
		for j < len(s) && isValueByte(s[j]) {
			j++
		}
		if n == i || j == i+1 || string(s[i+1:j]) == Placeholder || !IsSecretKey(string(s[n:i])) {
			continue
		}
		return i + 1, j, true
	}
	return 0, 0, false
}

func nextRandom[S ~string | ~[]byte](s S, from int) (int, int, bool) {
	i := from
	for i < len(s) {
		if !isAlnum(s[i]) {
			i++
			continue
		}
		j := i
		var upper, lower, digit, nonHex bool
		for j < len(s) && isAlnum(s[j]) {
			c := s[j]
			switch {
			case c >= 'A' && c <= 'Z':
				upper = true
				nonHex = nonHex || c > 'F'
			case c >= 'a' && c <= 'z':
				lower = true
				nonHex = nonHex || c > 'f'
			default:
				digit = true
			}
			j++
		}
		n, classes := j-i, btoi(upper)+btoi(lower)+btoi(digit)
		switch {
		case n >= 32 && classes == 3,
			n >= 40 && !nonHex && digit && (upper || lower),
			n >= 48 && digit && classes >= 2:
			return i, j, true
		}
		i = j
	}
	return 0, 0, false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
