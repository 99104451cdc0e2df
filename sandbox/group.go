package sandbox

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Target is a running-or-startable emulator, as a Group and tests see it.
// Every emulator Server (embedding *Core) satisfies it.
type Target interface {
	Name() string
	Handler() http.Handler
	// Start serves on addr ("" = a free loopback port) and returns the base URL.
	Start(addr string) (string, error)
	URL() string
	Close() error
	Effects(key string) int
	TotalEffects() int
	Ledger() *Ledger
	InjectFault(f Fault) error
	ClearFaults()
	Reset()
}

// Group is a set of emulators started and stopped together. Its user builds
// it from an explicit list of emulator constructors; nothing registers
// itself.
type Group []Target

// ErrUnknownTarget is returned for a listen address naming no emulator of
// the group.
var ErrUnknownTarget = errors.New("sandbox: no such emulator")

// Names returns the emulators' names, in the group's order.
func (g Group) Names() []string {
	names := make([]string, len(g))
	for i, t := range g {
		names[i] = t.Name()
	}
	return names
}

// Start starts every emulator of the group: on addrs[name] when given, else
// on a free loopback port. An address naming no emulator of the group is
// ErrUnknownTarget and starts nothing; on any error nothing is left
// running.
func (g Group) Start(addrs map[string]string) error {
	names := g.Names()
	for n := range addrs {
		if !slices.Contains(names, n) {
			return fmt.Errorf("%w %q (%s)", ErrUnknownTarget, n, strings.Join(names, ", "))
		}
	}
	for _, t := range g {
		if _, err := t.Start(addrs[t.Name()]); err != nil {
			return errors.Join(fmt.Errorf("start the %s emulator: %w", t.Name(), err), g.Close())
		}
	}
	return nil
}

// URLs returns name → base URL of the started emulators.
func (g Group) URLs() map[string]string {
	m := make(map[string]string, len(g))
	for _, t := range g {
		m[t.Name()] = t.URL()
	}
	return m
}

// Close stops every emulator, all at once (each may wait for its
// connections to go idle); safe twice.
func (g Group) Close() error {
	errs := make([]error, len(g))
	var wg sync.WaitGroup
	for i, t := range g {
		wg.Go(func() {
			if err := t.Close(); err != nil {
				errs[i] = fmt.Errorf("%s emulator: %w", t.Name(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
