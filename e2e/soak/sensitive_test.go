package main

import (
	"strings"
	"testing"

	"github.com/idemgate/idemgate/redact"
)

// TestSecretCanariesAreWhatTheRulesCatch: the phase's canaries are what
// screening refuses and masking hides — a Luhn-valid card number, as one run
// and as printed, and an sk_live_ key — so finding one means a rule was
// skipped, and their masked forms are no needle.
func TestSecretCanariesAreWhatTheRulesCatch(t *testing.T) {
	for range 50 {
		sc := newSecretCanaries()
		for _, n := range []string{sc.card, sc.printed()} {
			if k := redact.Detect(n); k != redact.KindCard {
				t.Fatalf("%s: %v, want a card", n, k)
			}
		}
		if k := redact.Detect(sc.key); k != redact.KindToken {
			t.Fatalf("%s: %v, want a token", sc.key, k)
		}
		masked := redact.String("card " + sc.printed() + ", " + sc.card + ", key " + sc.key)
		for _, n := range sc.needles() {
			if strings.Contains(masked, n) {
				t.Fatalf("masked text %q holds the needle %q", masked, n)
			}
		}
	}
}
