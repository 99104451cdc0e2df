package main

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/stripe"
	"github.com/idemgate/idemgate/adapters/tbank"
	"github.com/idemgate/idemgate/adapters/yookassa"
)

// AdaptersConfig configures each target adapter; a target left out is not
// built. Credentials come from the adapter's own environment variables or
// files (see each adapter's Config), never from this file in production.
type AdaptersConfig struct {
	YooKassa *yookassa.Config `mapstructure:"yookassa"`
	TBank    *tbank.Config    `mapstructure:"tbank"`
	Stripe   *stripe.Config   `mapstructure:"stripe"`
}

// buildAdapters builds the configured adapters and maps each routed
// operation type to its adapter.
func buildAdapters(c Config, log *slog.Logger) (map[string]adapters.Adapter, error) {
	byName := map[string]adapters.Adapter{}
	add := func(a adapters.Adapter, err error) error {
		if err != nil {
			return err
		}
		if _, dup := byName[a.Name()]; dup {
			return fmt.Errorf("adapters: two adapters named %q", a.Name())
		}
		byName[a.Name()] = a
		return nil
	}
	if cfg := c.Adapters.YooKassa; cfg != nil {
		cfg.Logger = log
		a, err := yookassa.New(*cfg)
		if err := add(a, wrap("yookassa", err)); err != nil {
			return nil, err
		}
	}
	if cfg := c.Adapters.TBank; cfg != nil {
		cfg.Logger = log
		a, err := tbank.New(*cfg)
		if err := add(a, wrap("tbank", err)); err != nil {
			return nil, err
		}
	}
	if cfg := c.Adapters.Stripe; cfg != nil {
		cfg.Logger = log
		a, err := stripe.New(*cfg)
		if err := add(a, wrap("stripe", err)); err != nil {
			return nil, err
		}
	}
	routes := map[string]adapters.Adapter{}
	for op, name := range c.Routes {
		a, ok := byName[name]
		if !ok {
			names := make([]string, 0, len(byName))
			for n := range byName {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("routes.%s: no adapter named %q is configured (configured: %v)", op, name, names)
		}
		routes[op] = a
	}
	return routes, nil
}

func wrap(name string, err error) error {
	if err != nil {
		return fmt.Errorf("adapters.%s: %w", name, err)
	}
	return nil
}
