package startstop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

type loop struct {
	BaseStartStop
	drained atomic.Bool
	cause   atomic.Value
}

func (l *loop) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := l.StartInit(ctx)
	if !shouldStart {
		return ErrAlreadyStarted
	}
	go func() {
		started()
		defer stopped()
		<-ctx.Done()
		l.cause.Store(context.Cause(ctx))
		l.drained.Store(true)
	}()
	return nil
}

var _ Service = (*loop)(nil)

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never signalled", what)
	}
}

func TestStartStopSignalsAndDrains(t *testing.T) {
	var l loop
	l.Stop() // before Start: returns at once
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait(t, l.Started(), "Started")
	if err := l.Start(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Start: %v, want ErrAlreadyStarted", err)
	}
	select {
	case <-l.Stopped():
		t.Fatal("Stopped before Stop")
	default:
	}
	l.Stop()
	if !l.drained.Load() {
		t.Fatal("Stop returned before the service finished")
	}
	if c, _ := l.cause.Load().(error); !errors.Is(c, ErrStop) {
		t.Fatalf("cause %v, want ErrStop", c)
	}
	wait(t, l.Stopped(), "Stopped")
	l.Stop() // again: returns at once
	if err := l.Start(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("Start after Stop: %v, want ErrAlreadyStarted", err)
	}
}

func TestParentContextStopsTheService(t *testing.T) {
	var l loop
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	wait(t, l.Stopped(), "Stopped after the parent ended")
	if !l.drained.Load() {
		t.Fatal("not drained")
	}
	l.Stop()
}
