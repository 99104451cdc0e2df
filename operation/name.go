package operation

// ValidName reports whether s is a name as the configuration spells the
// systems and sources it declares (a target system, a webhook source): 1 to
// 32 bytes of a-z, 0-9, '_' and '-'. Such a name is safe in a metric label,
// a subject token and a log key.
func ValidName(s string) bool { return word(s, 32, false) }

// ValidToken reports whether s is 1 to maxLen bytes of ASCII letters,
// digits, '_' and '-': safe, unescaped, as an HTTP header name or as a
// provider's object id in a URL path.
func ValidToken(s string, maxLen int) bool { return word(s, maxLen, true) }

// word reports whether s is 1 to maxLen bytes of a-z (and A-Z when upper),
// 0-9, '_' and '-'.
func word(s string, maxLen int, upper bool) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || upper && c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
