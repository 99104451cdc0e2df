package main

import (
	"fmt"
	"log/slog"
	"slices"
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

// configured is the build step of the adapter a section configures (none
// when cfg is nil): a copy of cfg, inject applied to its shared HTTP part,
// built by newAdapter.
func configured[C any, P interface {
	*C
	HTTP() *adapters.HTTPConfig
}, A adapters.Adapter](section string, cfg *C, newAdapter func(C) (A, error), inject func(*adapters.HTTPConfig)) []adapterEntry {
	if cfg == nil {
		return nil
	}
	return []adapterEntry{{section, func() (adapters.Adapter, error) {
		c := *cfg
		inject(P(&c).HTTP())
		return asAdapter(newAdapter(c))
	}}}
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
	entries := slices.Concat(
		configured("onec", a.OneC, onec.New, inject),
		configured("bitrix24", a.Bitrix24, bitrix24.New, inject),
		configured("amocrm", a.AmoCRM, amocrm.New, inject),
		configured("yookassa", a.YooKassa, yookassa.New, inject),
		configured("tbank", a.TBank, tbank.New, inject),
		configured("stripe", a.Stripe, stripe.New, inject),
		declaredAdapters(c, reg, inject),
	)
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
		if s, ok := ad.(adapters.Supporter); ok {
			if err := s.Supports(op); err != nil {
				return nil, fmt.Errorf("routes.%s: adapter %q cannot serve it: %w", op, name, err)
			}
		}
		routes[op] = ad
	}
	return routes, nil
}
