package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that a closed gateway (and the daemon under it) leaves no
// goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
