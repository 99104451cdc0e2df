package crashpoint

import "testing"

// current9 reads 9 as the row's current token.
func current9() (int64, error) { return 9, nil }

// TestNoOpWithoutSoakTag: a normal build never crashes, never breaks, and
// completes with the caller's own token.
func TestNoOpWithoutSoakTag(t *testing.T) {
	if Enabled {
		t.Skip("built with -tags soak")
	}
	t.Setenv("IDEMGATE_SOAK_CRASH", "before_ack")
	t.Setenv("IDEMGATE_SOAK_BREAK", "no_fencing")
	for _, p := range Points {
		Hit(p)
	}
	for _, b := range Breaks {
		if Broken(b) {
			t.Errorf("Broken(%s) in a build without the soak tag", b)
		}
		Do(b, func() { t.Errorf("Do(%s) ran in a build without the soak tag", b) })
	}
	if got := Token(3, current9); got != 3 {
		t.Errorf("Token = %d, want the caller's 3", got)
	}
}
