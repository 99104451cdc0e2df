package ctxsleep_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/ctxsleep"
)

func TestFor(t *testing.T) {
	t.Parallel()
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	if !ctxsleep.For(live, time.Microsecond) {
		t.Error("a wait that ran out with the context live reported false")
	}
	if !ctxsleep.For(live, 0) || !ctxsleep.For(live, -time.Second) {
		t.Error("no wait with the context live reported false")
	}
	// An hour under an ended context returns at once: were it to wait, the
	// test would hang until its timeout.
	if ctxsleep.For(ended, time.Hour) {
		t.Error("a wait cut short by its context reported true")
	}
	if ctxsleep.For(ended, 0) {
		t.Error("no wait under an ended context reported true")
	}

	// A context that ends during the wait cuts it short.
	ending, stop := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- ctxsleep.For(ending, time.Hour) }()
	stop()
	if <-done {
		t.Error("a wait whose context ended reported true")
	}
}
