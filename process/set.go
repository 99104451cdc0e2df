package process

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/idemgate/idemgate/operation"
)

// CompileAll compiles every declared process against the operation types
// in reg and returns them as a Set for env. Every problem of every process
// is reported, in name order; an operation type that uses the "process."
// prefix is refused too (it would take a process's subject and keys).
func CompileAll(env string, decls map[string]Decl, reg *operation.Registry) (*Set, error) {
	var errs []error
	for _, n := range reg.Names() {
		if strings.HasPrefix(n, OperationPrefix) {
			errs = append(errs, fmt.Errorf("%w: operations.%s: the %q prefix is reserved for processes; name the type otherwise", ErrInvalid, n, OperationPrefix))
		}
	}
	names := make([]string, 0, len(decls))
	for n := range decls {
		names = append(names, n)
	}
	sort.Strings(names)
	defs := make([]*Definition, 0, len(names))
	for _, n := range names {
		d, err := Compile(n, decls[n], reg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defs = append(defs, d)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s, err := NewSet(env, defs...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Set holds the processes a daemon serves: the configured definitions by
// name, and every definition it knows by digest — the configured ones and
// those older ones that running processes started on (Keep). It decodes
// process commands. It is safe for concurrent use.
type Set struct {
	env string

	mu       sync.RWMutex
	byName   map[string]*Definition
	byDigest map[string]*entry
	// current decodes a command by the configured definitions (and, for
	// a process no longer configured, by a kept one); reg is its registry.
	current *operation.Decoder
	reg     *operation.Registry
}

// entry is a definition with the decoder of its input.
type entry struct {
	def *Definition
	dec *operation.Decoder
}

// NewSet returns the set of the configured definitions defs for env.
func NewSet(env string, defs ...*Definition) (*Set, error) {
	if err := operation.ValidateEnv(env); err != nil {
		return nil, fmt.Errorf("processes: env: %w", err)
	}
	s := &Set{env: env, byName: map[string]*Definition{}, byDigest: map[string]*entry{}}
	reg := operation.NewRegistry()
	for _, d := range defs {
		if _, dup := s.byName[d.Name]; dup {
			return nil, fmt.Errorf("%w: processes.%s declared twice", ErrInvalid, d.Name)
		}
		s.byName[d.Name] = d
		if err := reg.Register(d.Input); err != nil {
			return nil, fmt.Errorf("%w: processes.%s: %w", ErrInvalid, d.Name, err)
		}
		if err := s.keep(d); err != nil {
			return nil, err
		}
	}
	s.current, s.reg = &operation.Decoder{Env: env, Registry: reg}, reg
	return s, nil
}

// Keep adds a definition known by its digest only (one a running process
// started on, read back from the journal): it decodes and runs that
// process, and is not offered for new ones.
func (s *Set) Keep(d *Definition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.keep(d); err != nil {
		return err
	}
	if _, ok := s.reg.Lookup(d.Operation); !ok {
		// A process no longer configured: its commands still decode (then
		// by their own definition, DecodeAs), so that it can finish.
		if err := s.reg.Register(d.Input); err != nil {
			return fmt.Errorf("%w: processes.%s: %w", ErrInvalid, d.Name, err)
		}
	}
	return nil
}

func (s *Set) keep(d *Definition) error {
	if _, ok := s.byDigest[d.Digest]; ok {
		return nil
	}
	reg := operation.NewRegistry()
	if err := reg.Register(d.Input); err != nil {
		return fmt.Errorf("%w: processes.%s: %w", ErrInvalid, d.Name, err)
	}
	s.byDigest[d.Digest] = &entry{def: d, dec: &operation.Decoder{Env: s.env, Registry: reg}}
	return nil
}

// Env returns the environment the set's keys are made in.
func (s *Set) Env() string { return s.env }

// Lookup returns the configured definition of the named process.
func (s *Set) Lookup(name string) (*Definition, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.byName[name]
	return d, ok
}

// ByDigest returns the definition with that digest, configured or kept.
func (s *Set) ByDigest(digest string) (*Definition, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.byDigest[digest]
	if !ok {
		return nil, false
	}
	return e.def, true
}

// Definitions returns the configured definitions, sorted by name.
func (s *Set) Definitions() []*Definition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Definition, 0, len(s.byName))
	for _, d := range s.byName {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len is the number of configured processes.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byName)
}

// Decode decodes a process command by the configured definitions: its key,
// its normalised input and its fingerprint. An unknown process is a
// rejection like an unknown operation (operation.DecodeError).
func (s *Set) Decode(data []byte) (operation.Operation, error) {
	return s.current.Decode(data)
}

// DecodeCommand is Decode for a command given as a struct.
func (s *Set) DecodeCommand(cmd operation.Command) (operation.Operation, error) {
	return s.current.DecodeCommand(cmd)
}

// DecodeAs decodes a process command by the definition with that digest
// (the one its process started on).
func (s *Set) DecodeAs(digest string, data []byte) (operation.Operation, error) {
	s.mu.RLock()
	e, ok := s.byDigest[digest]
	s.mu.RUnlock()
	if !ok {
		return operation.Operation{}, fmt.Errorf("%w: no definition with digest %s is known here", ErrUnknownDefinition, digest)
	}
	return e.dec.Decode(data)
}

// ErrUnknownDefinition: a process runs on a definition this daemon does
// not hold (neither configured nor kept).
var ErrUnknownDefinition = errors.New("unknown process definition")

// Input returns the process's input values: its significant and
// insignificant fields, normalised.
func Input(op operation.Operation) map[string]any {
	in := make(map[string]any, len(op.Fields)+len(op.Extra))
	for k, v := range op.Fields {
		in[k] = v
	}
	for k, v := range op.Extra {
		in[k] = v
	}
	return in
}
