package redact

// MaskPANs masks payment card numbers in s, keeping the first six and the
// last four digits (the PCI DSS display rule): "4111111111111111" becomes
// "411111******1111", and "4111 1111 1111 1111" becomes "4111 11** **** 1111"
// (separators stay where they were, so the text keeps its length).
//
// A card number is 13–19 digits that pass the Luhn check, written either as
// one run of digits or as consecutive groups of digits joined by single
// spaces or dashes. Whole groups are considered: "2026-12-02 4111 1111 1111
// 1111" has its card masked, but a single 20-digit number (a bank account,
// say) is left alone even if 16 of its digits happen to pass Luhn. The result
// holds no card number by this definition, and MaskPANs(MaskPANs(s)) ==
// MaskPANs(s).
func MaskPANs(s string) string {
	if !hasDigits(s, minPAN) {
		return s
	}
	b := []byte(s)
	changed := false
	// Each pass replaces digits with '*', so the loop ends; a second pass is
	// rarely needed (masking can split a run and expose a new grouping).
	for maskOnce(b) {
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

func isPANSep(c byte) bool { return c == ' ' || c == '-' }

// luhn reports whether the digits pass the Luhn check.
func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

type span struct{ start, end int }

// maskOnce masks, in place, every card number found by one left-to-right scan
// and reports whether it changed anything.
func maskOnce(b []byte) bool {
	changed := false
	var groups []span
	var digits [maxPAN]byte
	for i := 0; i < len(b); {
		if !isDigit(b[i]) {
			i++
			continue
		}
		// A run: digit groups joined by single separators.
		groups = groups[:0]
		j := i
		for {
			start := j
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			groups = append(groups, span{start, j})
			if j+1 < len(b) && isPANSep(b[j]) && isDigit(b[j+1]) {
				j++
				continue
			}
			break
		}
		i = j
		// Every sequence of whole groups that is a card gets its middle
		// masked; overlapping candidates are all masked, so that a card
		// preceded by other digits (a date, say) cannot hide behind a
		// chance Luhn match that starts earlier.
		var cards [][2]int
		for a := range groups {
			total := 0
			for e := a; e < len(groups); e++ {
				total += groups[e].end - groups[e].start
				if total > maxPAN {
					break
				}
				if total < minPAN {
					continue
				}
				n := 0
				for _, g := range groups[a : e+1] {
					n += copy(digits[n:], b[g.start:g.end])
				}
				if luhn(digits[:n]) {
					cards = append(cards, [2]int{a, e})
				}
			}
		}
		// Mask after finding all, so every candidate was judged on the
		// original digits.
		for _, c := range cards {
			if maskDigits(b, groups[c[0]:c[1]+1]) {
				changed = true
			}
		}
	}
	return changed
}

// maskDigits replaces all but the first six and last four digits of the
// groups with '*' and reports whether any was still a digit.
func maskDigits(b []byte, groups []span) bool {
	changed := false
	total := 0
	for _, g := range groups {
		total += g.end - g.start
	}
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
