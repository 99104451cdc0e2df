// Package startstop is the start/stop base of idemgate's long-running
// services (the worker, the reconciler, the janitor, the ingest server),
// after River's startstop: Start(ctx) returns once the service runs, Stop
// cancels its context and returns once it has stopped, and Started and
// Stopped signal both for whoever waits on them.
//
// A service embeds BaseStartStop, calls StartInit at the top of its Start
// and runs its main goroutine as
//
//	ctx, shouldStart, started, stopped := s.StartInit(ctx)
//	if !shouldStart {
//		return ErrAlreadyStarted
//	}
//	go func() {
//		started()
//		defer stopped()
//		<-ctx.Done() // or a loop until ctx ends; then drain
//	}()
//
// A service starts once: a second Start, or a Start after Stop, does
// nothing. Stop before Start, and a second Stop, return at once.
//
// It imports the standard library only.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStop is the cause of a service context cancelled by Stop.
var ErrStop = errors.New("service stopped")

// ErrAlreadyStarted is what a service's Start returns when StartInit says
// not to start.
var ErrAlreadyStarted = errors.New("already started")

// Service is what every service offers.
type Service interface {
	Start(ctx context.Context) error
	Started() <-chan struct{}
	Stop()
	Stopped() <-chan struct{}
}

// BaseStartStop carries a service's start/stop state. The zero value is
// ready to use.
type BaseStartStop struct {
	mu          sync.Mutex
	initialised bool
	startCalled bool
	cancel      context.CancelCauseFunc
	started     chan struct{}
	stopped     chan struct{}
}

func (s *BaseStartStop) init() {
	if !s.initialised {
		s.started, s.stopped = make(chan struct{}), make(chan struct{})
		s.initialised = true
	}
}

// StartInit begins a Start. When shouldStart is false the service was
// started before and Start must return without doing anything. Otherwise
// ctx is the service's context (cancelled by Stop with cause ErrStop, or
// when the parent ends); the service calls started once it runs and stopped
// (exactly once) when it has finished.
func (s *BaseStartStop) StartInit(ctx context.Context) (_ context.Context, shouldStart bool, started, stopped func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if s.startCalled {
		return ctx, false, func() {}, func() {}
	}
	s.startCalled = true
	ctx, s.cancel = context.WithCancelCause(ctx)
	var startOnce, stopOnce sync.Once
	startedCh, stoppedCh := s.started, s.stopped
	return ctx, true,
		func() { startOnce.Do(func() { close(startedCh) }) },
		func() {
			stopOnce.Do(func() {
				startOnce.Do(func() { close(startedCh) })
				close(stoppedCh)
			})
		}
}

// Started is closed once the service runs.
func (s *BaseStartStop) Started() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.started
}

// Stopped is closed once the service has stopped.
func (s *BaseStartStop) Stopped() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.stopped
}

// Stop cancels the service's context and waits until it has stopped. It
// returns at once before Start and when called again.
func (s *BaseStartStop) Stop() {
	s.mu.Lock()
	if !s.startCalled {
		s.mu.Unlock()
		return
	}
	cancel, stopped := s.cancel, s.stopped
	s.mu.Unlock()
	cancel(ErrStop)
	<-stopped
}
