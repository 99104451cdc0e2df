package mcp

import (
	"testing"
	"time"
)

// TestRequestStateSignedBoundAndSpent: a state is trusted once, for its
// own key and caller, before it expires; a forged, a carried, an expired or
// a spent one is refused.
func TestRequestStateSignedBoundAndSpent(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	s := newStateSigner([]byte("a key of thirty-two bytes, or so"))
	s.now = func() time.Time { return now }
	st := s.sign("prod:payment.charge:i-1:v1", "caller-a", time.Minute)
	for name, tc := range map[string]struct{ state, key, who string }{
		"forged":         {st[:len(st)-2] + "xx", "prod:payment.charge:i-1:v1", "caller-a"},
		"another intent": {st, "prod:payment.charge:i-2:v1", "caller-a"},
		"another caller": {st, "prod:payment.charge:i-1:v1", "caller-b"},
		"not a state":    {"nonsense", "prod:payment.charge:i-1:v1", "caller-a"},
	} {
		if err := s.use(tc.state, tc.key, tc.who); err == nil {
			t.Errorf("%s: trusted", name)
		}
	}
	if err := s.use(st, "prod:payment.charge:i-1:v1", "caller-a"); err != nil {
		t.Fatalf("the state itself refused: %v", err)
	}
	if err := s.use(st, "prod:payment.charge:i-1:v1", "caller-a"); err == nil {
		t.Error("a spent state trusted again")
	}
	late := s.sign("prod:payment.charge:i-3:v1", "caller-a", time.Minute)
	now = now.Add(2 * time.Minute)
	if err := s.use(late, "prod:payment.charge:i-3:v1", "caller-a"); err == nil {
		t.Error("an expired state trusted")
	}
	other := newStateSigner(nil)
	if err := other.use(s.sign("prod:payment.charge:i-4:v1", "caller-a", time.Minute), "prod:payment.charge:i-4:v1", "caller-a"); err == nil {
		t.Error("a state signed under another key trusted")
	}
}
