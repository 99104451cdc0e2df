package main

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/amocrm"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/adapters/httpjson"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/adapters/stripe"
	"github.com/idemgate/idemgate/adapters/tbank"
	"github.com/idemgate/idemgate/adapters/yookassa"
)

// AdaptersConfig configures each target adapter; a target left out is not
// built. Credentials come from the adapter's own environment variables or
// files (see each adapter's Config), never from this file in production.
type AdaptersConfig struct {
	OneC     *onec.Config     `mapstructure:"onec"`
	Bitrix24 *bitrix24.Config `mapstructure:"bitrix24"`
	AmoCRM   *amocrm.Config   `mapstructure:"amocrm"`
	YooKassa *yookassa.Config `mapstructure:"yookassa"`
	TBank    *tbank.Config    `mapstructure:"tbank"`
	Stripe   *stripe.Config   `mapstructure:"stripe"`
	// HTTP declares further JSON-over-HTTP targets by name (declared.go).
	HTTP map[string]*httpjson.Config `mapstructure:"http"`
}

// adapterEntry is one configured adapter's build step.
type adapterEntry struct {
	section string
	build   func() (adapters.Adapter, error)
}

// asAdapter turns a constructor's concrete result into the contract,
// without a typed nil on error.
func asAdapter[A adapters.Adapter](a A, err error) (adapters.Adapter, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}

// buildAdapters builds the configured adapters and maps each routed
// operation type to its adapter. Each adapter's client keeps as many idle
// connections as the worker may have calls in flight (all of them may go to
// one target) and counts the connections it opens on m (nil: uncounted).
func buildAdapters(c Config, log *slog.Logger, m *adapters.Metrics) (map[string]adapters.Adapter, error) {
	a := c.Adapters
	reg, err := c.registry()
	if err != nil {
		return nil, err
	}
	inFlight := c.Worker.WithDefaults().MaxInFlight
	inject := func(h *adapters.HTTPConfig) {
		h.Logger, h.MaxInFlight, h.Metrics = log, inFlight, m
	}
	type entry = adapterEntry
	var entries []entry
	if cfg := a.OneC; cfg != nil {
		entries = append(entries, entry{"onec", func() (adapters.Adapter, error) { c := *cfg; inject(&c.HTTPConfig); return asAdapter(onec.New(c)) }})
	}
	if cfg := a.Bitrix24; cfg != nil {
		entries = append(entries, entry{"bitrix24", func() (adapters.Adapter, error) { c := *cfg; inject(&c.HTTPConfig); return asAdapter(bitrix24.New(c)) }})
	}
	if cfg := a.AmoCRM; cfg != nil {
		entries = append(entries, entry{"amocrm", func() (adapters.Adapter, error) { c := *cfg; inject(&c.HTTPConfig); return asAdapter(amocrm.New(c)) }})
	}
	if cfg := a.YooKassa; cfg != nil {
		entries = append(entries, entry{"yookassa", func() (adapters.Adapter, error) { c := *cfg; inject(&c.HTTPConfig); return asAdapter(yookassa.New(c)) }})
	}
	if cfg := a.TBank; cfg != nil {
		entries = append(entries, entry{"tbank", func() (adapters.Adapter, error) { c := *cfg; inject(&c.HTTPConfig); return asAdapter(tbank.New(c)) }})
	}
	if cfg := a.Stripe; cfg != nil {
		entries = append(entries, entry{"stripe", func() (adapters.Adapter, error) { c := *cfg; inject(&c.HTTPConfig); return asAdapter(stripe.New(c)) }})
	}
	entries = append(entries, declaredAdapters(c, reg, inject)...)
	byName := map[string]adapters.Adapter{}
	for _, e := range entries {
		ad, err := e.build()
		if err != nil {
			return nil, fmt.Errorf("adapters.%s: %w", e.section, err)
		}
		if _, dup := byName[ad.Name()]; dup {
			return nil, fmt.Errorf("adapters.%s: two adapters named %q", e.section, ad.Name())
		}
		byName[ad.Name()] = ad
	}
	routes := map[string]adapters.Adapter{}
	for op, name := range c.Routes {
		ad, ok := byName[name]
		if !ok {
			names := make([]string, 0, len(byName))
			for n := range byName {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("routes.%s: no adapter named %q is configured (configured: %v)", op, name, names)
		}
		if typ, ok := reg.Lookup(op); ok && typ.TargetSystem != ad.TargetSystem() {
			return nil, fmt.Errorf("routes.%s: adapter %q serves %s targets, %s needs a %s target", op, name, ad.TargetSystem(), op, typ.TargetSystem)
		}
		routes[op] = ad
	}
	return routes, nil
}
