package redact

// MaskPANs masks payment card numbers in s, keeping the first six and the
// last four digits (the PCI DSS display rule): "4111111111111111" becomes
// "411111******1111", and "4111 1111 1111 1111" becomes "4111 11** **** 1111"
// (separators stay where they were, so the text keeps its length).
//
// A card number is what Detect reports as KindCard: 13–19 digits passing the
// Luhn check, written as one run of digits or as groups in a printed card
// layout joined by single separators. Whole groups are considered: in
// "2026-12-02 4111 1111 1111 1111" only the card is masked, and a single
// 20-digit number (a bank account, say) is left alone even if 16 of its
// digits happen to pass Luhn. The result holds no card number by this
// definition, and MaskPANs(MaskPANs(s)) == MaskPANs(s).
func MaskPANs(s string) string {
	if !hasDigits(s, minPAN) {
		return s
	}
	b := []byte(s)
	changed := false
	// Each pass replaces digits with '*', so the loop ends; a second pass is
	// rarely needed (masking can split a group and expose a new layout).
	for {
		if _, _, masked := scanCards(string(b), b); !masked {
			break
		}
		changed = true
	}
	if !changed {
		return s
	}
	return string(b)
}

const (
	minPAN = 13
	maxPAN = 19
	// maxCardGroups is the most groups a card layout has (4-4-4-4-3).
	maxCardGroups = 5
)

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// hasDigits reports whether s holds at least n ASCII digits.
func hasDigits(s string, n int) bool {
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			n--
			if n == 0 {
				return true
			}
		}
	}
	return false
}

// isCardSep reports whether c may join the digit groups of a printed card.
func isCardSep(c byte) bool { return c == ' ' || c == '-' || c == '.' || c == '_' || c == '~' }

type span struct{ start, end int }

// hasCard reports whether s holds a card number.
func hasCard[S ~string | ~[]byte](s S) bool {
	_, _, ok := scanCards(s, nil)
	return ok
}

// scanCards looks for card numbers in s. With mask nil it stops at the first
// and returns its span. Otherwise mask is a copy of s: every card found is
// masked in mask while digits are judged on s, so that overlapping
// candidates (a card next to a chance Luhn match) are all judged on the
// original text; it then reports whether any digit was masked.
func scanCards[S ~string | ~[]byte](s S, mask []byte) (start, end int, ok bool) {
	var win [maxCardGroups]span // the last groups of the current run, oldest first
	i := 0
	for i < len(s) {
		if n := uuidLen(s, i); n > 0 {
			i += n // a UUID's digits are never a card's
			continue
		}
		if !isDigit(s[i]) {
			i++
			continue
		}
		// A run: digit groups joined by single separators.
		n := 0
		for {
			st := i
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			if n == len(win) {
				copy(win[:], win[1:])
				n--
			}
			win[n] = span{st, i}
			n++
			// Every candidate ending with this group: the group alone, or
			// it with the groups before it.
			total := 0
			for a := n - 1; a >= 0; a-- {
				total += win[a].end - win[a].start
				if total > maxPAN {
					break
				}
				groups := win[a:n]
				if total < minPAN || len(groups) > 1 && !cardLayout(groups) || !luhnGroups(s, groups) {
					continue
				}
				if mask == nil {
					return groups[0].start, groups[len(groups)-1].end, true
				}
				if maskDigits(mask, groups, total) {
					ok = true
				}
			}
			if i+1 < len(s) && isCardSep(s[i]) && isDigit(s[i+1]) && uuidLen(s, i+1) == 0 {
				i++
				continue
			}
			break
		}
	}
	return 0, 0, ok
}

// uuidLen is the length of the UUID that starts at i, as a token of its
// own (no letter or digit just before or after it), or 0: 36 for the
// canonical form (8-4-4-4-12 hex digits), 32 for its 32 hex digits with a
// version (1-8) and a variant (8, 9, a, b) where a UUID has them. Random
// UUIDs hold digit groups in a card's layout by chance — in
// "545b2279-3963-4203-89cf-…", 2279-3963-4203-89 passes Luhn; about one
// random UUID in 3,000 does — and a UUID is the id most callers make for an
// intent, so its digits are not judged as a card's.
func uuidLen[S ~string | ~[]byte](s S, i int) int {
	if i > 0 && isAlnum(s[i-1]) {
		return 0
	}
	token := func(n int) bool { return i+n == len(s) || i+n < len(s) && !isAlnum(s[i+n]) }
	if i+36 <= len(s) && token(36) {
		ok := true
		for k := 0; k < 36 && ok; k++ {
			if k == 8 || k == 13 || k == 18 || k == 23 {
				ok = s[i+k] == '-'
			} else {
				ok = isHex(s[i+k])
			}
		}
		if ok {
			return 36
		}
	}
	if i+32 <= len(s) && token(32) {
		for k := 0; k < 32; k++ {
			if !isHex(s[i+k]) {
				return 0
			}
		}
		if v, r := s[i+12], lowerASCII(s[i+16]); v >= '1' && v <= '8' && (r == '8' || r == '9' || r == 'a' || r == 'b') {
			return 32
		}
	}
	return 0
}

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// cardLayout reports whether group lengths look like a printed card number:
// 4-4-4-1..4, 4-4-4-4-1..3 (all 4s but a shorter last group), 4-6-4 or 4-6-5.
func cardLayout(groups []span) bool {
	l := func(k int) int { return groups[k].end - groups[k].start }
	if len(groups) == 3 && l(0) == 4 && l(1) == 6 && (l(2) == 4 || l(2) == 5) {
		return true
	}
	if len(groups) < 3 {
		return false
	}
	for k := range groups {
		if k < len(groups)-1 && l(k) != 4 {
			return false
		}
	}
	last := l(len(groups) - 1)
	return last >= 1 && last <= 4
}

// luhnGroups reports whether the digits of the groups, read in order, pass
// the Luhn check.
func luhnGroups[S ~string | ~[]byte](s S, groups []span) bool {
	sum := 0
	double := false
	for g := len(groups) - 1; g >= 0; g-- {
		for i := groups[g].end - 1; i >= groups[g].start; i-- {
			d := int(s[i] - '0')
			if double {
				d *= 2
				if d > 9 {
					d -= 9
				}
			}
			sum += d
			double = !double
		}
	}
	return sum%10 == 0
}

// luhn reports whether the decimal digits pass the Luhn check.
func luhn[S ~string | ~[]byte](digits S) bool {
	return luhnGroups(digits, []span{{0, len(digits)}})
}

// maskDigits replaces all but the first six and last four of the total
// digits of the groups with '*' and reports whether any was still a digit.
func maskDigits(b []byte, groups []span, total int) bool {
	changed := false
	k := 0
	for _, g := range groups {
		for p := g.start; p < g.end; p++ {
			if k >= 6 && k < total-4 && b[p] != '*' {
				b[p] = '*'
				changed = true
			}
			k++
		}
	}
	return changed
}
