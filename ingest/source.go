// A webhook source as New builds it from the configuration: its allow-list,
// secrets, keys and routes, each route checked against the operation
// registry.

package ingest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

type source struct {
	name      string
	cfg       Source
	allowed   []netip.Prefix
	secrets   []redact.Secret
	keys      [][]byte // Standard Webhooks keys, decoded
	routes    map[string]Route
	refetcher Refetcher
	counters  *counters
	// unroutedTypes are the event types already logged as having no route.
	unroutedTypes sync.Map
}

func sourceNamed(srcs []Source, name string) bool {
	for _, s := range srcs {
		if s.Name == name {
			return true
		}
	}
	return false
}

func newSource(sc Source, o options) (*source, error) {
	src := &source{name: sc.Name, cfg: sc, routes: make(map[string]Route, len(sc.Routes)), counters: &counters{}}
	src.allowed, _ = parsePrefixes(sc.AllowedAddresses) // checked by Validate
	src.secrets = sc.Secrets
	if len(src.secrets) == 0 && sc.SecretsFile != "" {
		secrets, err := readSecretsFile(sc.SecretsFile)
		if err != nil {
			return nil, err
		}
		src.secrets = secrets
	}
	if sc.Scheme == SchemeStandard {
		for i, sec := range src.secrets {
			key, err := StandardKey(string(sec))
			if err != nil {
				return nil, fmt.Errorf("%w: secret %d: %w", ErrInvalidConfig, i+1, err)
			}
			src.keys = append(src.keys, key)
		}
	}
	if r, ok := o.refetchers[sc.Name]; ok {
		src.refetcher = r
	} else if sc.Scheme == SchemeYooKassa {
		if !sc.Refetch.configured() {
			return nil, fmt.Errorf("%w: yookassa needs refetch credentials (shop_id, secret_key): its notifications are trusted only after a re-fetch", ErrInvalidConfig)
		}
		rc := sc.Refetch
		if rc.SecretKey.IsZero() {
			keys, err := readSecretsFile(rc.SecretKeyFile)
			if err != nil {
				return nil, err
			}
			rc.SecretKey = keys[0]
		}
		ref, err := NewYooKassaRefetcher(rc, o.client)
		if err != nil {
			return nil, err
		}
		src.refetcher = ref
	}
	for _, r := range sc.Routes {
		if err := checkRoute(r, o.registry); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Event, err)
		}
		if sc.Scheme == SchemeTBank {
			if err := checkSignedPaths(r); err != nil {
				return nil, fmt.Errorf("route %s: %w", r.Event, err)
			}
		}
		src.routes[r.Event] = r
	}
	return src, nil
}

// checkRoute checks a route against the registered operation type.
func checkRoute(r Route, reg *operation.Registry) error {
	typ, ok := reg.Lookup(r.Operation)
	if !ok {
		return fmt.Errorf("%w: operation %s is not registered", ErrInvalidConfig, r.Operation)
	}
	if typ.RequiresApproval {
		return fmt.Errorf("%w: operation %s moves money and needs an approval, which a webhook cannot give", ErrInvalidConfig, r.Operation)
	}
	mapped := map[string]bool{}
	for _, f := range r.Payload {
		if _, ok := typ.Field(f.Field); !ok {
			return fmt.Errorf("%w: %s has no field %s", ErrInvalidConfig, r.Operation, f.Field)
		}
		mapped[f.Field] = !f.Optional
	}
	for _, f := range typ.Fields {
		if f.Required && !mapped[f.Name] {
			return fmt.Errorf("%w: %s needs field %s, which is not mapped (or mapped as optional)", ErrInvalidConfig, r.Operation, f.Name)
		}
	}
	return nil
}

// checkSignedPaths refuses T-Bank paths into nested objects: the Token signs
// root scalars only, so a nested value (Data, Receipt) may have been changed.
func checkSignedPaths(r Route) error {
	paths := slices.Clone(r.IntentPaths)
	for _, f := range r.Payload {
		if f.Path != "" {
			paths = append(paths, f.Path)
		}
	}
	for _, p := range paths {
		if strings.Contains(p, ".") {
			return fmt.Errorf("%w: path %s is nested, and T-Bank's Token signs root fields only", ErrInvalidConfig, p)
		}
	}
	return nil
}
