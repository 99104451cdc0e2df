package worker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the worker, the reconciler, the heartbeats and the
// group commits leave no goroutine behind once stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
