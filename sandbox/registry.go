package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
)

// Target is a running-or-startable emulator, as the registry and tests see
// it. Every emulator Server (embedding *Core) satisfies it.
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

// Factory builds an emulator with its target-specific defaults and the
// shared options.
type Factory func(opts Options) Target

// Registry maps emulator names to factories.
type Registry struct {
	mu        sync.Mutex
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{factories: make(map[string]Factory)} }

// DefaultRegistry holds the emulators registered by their packages' init
// (import the emulator packages, e.g. _ ".../sandbox/onec", to register them).
var DefaultRegistry = NewRegistry()

// Register adds a factory to DefaultRegistry.
func Register(name string, f Factory) { DefaultRegistry.Register(name, f) }

// Register adds a factory; a second registration of a name panics (a
// programming error at init time).
func (r *Registry) Register(name string, f Factory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.factories[name]; dup {
		panic("sandbox: emulator registered twice: " + name)
	}
	r.factories[name] = f
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrUnknownTarget is returned for a name nobody registered.
var ErrUnknownTarget = errors.New("sandbox: unknown emulator")

// New builds the named emulator without starting it.
func (r *Registry) New(name string, opts Options) (Target, error) {
	r.mu.Lock()
	f, ok := r.factories[name]
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownTarget, name, r.Names())
	}
	return f(opts), nil
}

// Group is a set of started emulators.
type Group struct {
	// Targets maps names to started emulators; Targets[name].URL() is the base URL.
	Targets map[string]Target
}

// URLs returns name → base URL.
func (g *Group) URLs() map[string]string {
	m := make(map[string]string, len(g.Targets))
	for n, t := range g.Targets {
		m[n] = t.URL()
	}
	return m
}

// Close stops every emulator of the group.
func (g *Group) Close() error {
	var errs []error
	for _, t := range g.Targets {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

// StartAll builds and starts emulators. addrs maps name → listen address
// ("" = free loopback port); a nil or empty map starts every registered
// emulator on a free loopback port. On error nothing is left running.
func (r *Registry) StartAll(addrs map[string]string, opts Options) (*Group, error) {
	if len(addrs) == 0 {
		addrs = make(map[string]string)
		for _, n := range r.Names() {
			addrs[n] = ""
		}
	}
	g := &Group{Targets: make(map[string]Target, len(addrs))}
	for name, addr := range addrs {
		t, err := r.New(name, opts)
		if err == nil {
			_, err = t.Start(addr)
		}
		if err != nil {
			return nil, errors.Join(err, g.Close())
		}
		g.Targets[name] = t
	}
	return g, nil
}

// RunAll starts the emulators of DefaultRegistry (see StartAll for addrs),
// calls ready (if not nil) with name → base URL, and serves until ctx is
// done; then it closes them all.
func RunAll(ctx context.Context, addrs map[string]string, opts Options, ready func(urls map[string]string)) error {
	opts = opts.WithDefaults()
	g, err := DefaultRegistry.StartAll(addrs, opts)
	if err != nil {
		return err
	}
	for n, u := range g.URLs() {
		opts.Logger.Info("sandbox started", "target_system", n, "url", u)
	}
	if ready != nil {
		ready(g.URLs())
	}
	<-ctx.Done()
	return g.Close()
}
