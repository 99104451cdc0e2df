package main

import (
	"fmt"
	"sort"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/httpjson"
	"github.com/idemgate/idemgate/emulate"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/sandbox/generic"
)

// registry is the built-in operation types plus those declared under
// operations:. An unknown field kind or an unsafe declaration is an error
// naming the key (the daemon exits 78).
func (c Config) registry() (*operation.Registry, error) {
	return operation.RegistryWith(c.Operations)
}

// declaredAdapters returns the build steps of the targets declared under
// adapters.http.<name>, in name order. Each serves the operation types
// routed to its name (their fields are what its templates may name).
func declaredAdapters(c Config, reg *operation.Registry, inject func(*adapters.HTTPConfig)) []adapterEntry {
	names := make([]string, 0, len(c.Adapters.HTTP))
	for n := range c.Adapters.HTTP {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []adapterEntry
	for _, n := range names {
		cfg := c.Adapters.HTTP[n]
		if cfg == nil {
			continue
		}
		out = append(out, adapterEntry{"http." + n, func() (adapters.Adapter, error) {
			d := *cfg
			if d.Name == "" {
				d.Name = n
			}
			inject(&d.HTTPConfig)
			d.Types = nil
			for op, target := range c.Routes {
				if target != d.Name {
					continue
				}
				t, ok := reg.Lookup(op)
				if !ok {
					return nil, fmt.Errorf("routes.%s: unknown operation type", op)
				}
				d.Types = append(d.Types, t)
			}
			sort.Slice(d.Types, func(i, j int) bool { return d.Types[i].Name < d.Types[j].Name })
			return asAdapter(httpjson.New(d))
		}})
	}
	return out
}

// declaredEmulators builds, not started, a generic emulator for each
// target declared under adapters.http, from the same declaration. A
// bearer target's emulator takes the token sandboxes.DeclaredToken names.
func declaredEmulators(c Config, opts sandbox.Options) ([]sandbox.Target, error) {
	names := make([]string, 0, len(c.Adapters.HTTP))
	for n := range c.Adapters.HTTP {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []sandbox.Target
	for _, n := range names {
		cfg := c.Adapters.HTTP[n]
		if cfg == nil {
			continue
		}
		d := *cfg
		if d.Name == "" {
			d.Name = n
		}
		spec, err := emulate.Spec(d)
		if err != nil {
			return nil, fmt.Errorf("adapters.http.%s: %w", n, err)
		}
		if d.Auth.Scheme == "bearer" {
			spec.Token = "sandbox_" + d.Name + "_token"
		}
		srv, err := generic.New(generic.Options{Options: opts, Spec: spec})
		if err != nil {
			return nil, fmt.Errorf("adapters.http.%s: %w", n, err)
		}
		out = append(out, srv)
	}
	return out, nil
}
