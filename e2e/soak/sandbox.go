package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// sandboxInfo is what `idemgate sandbox --json` described: each emulator's
// base URL, the adapters.<name> block pointing a daemon at it, and the
// values of the credentials it marked as secrets.
type sandboxInfo struct {
	urls     map[string]string
	adapters map[string]map[string]any
	secrets  []string
}

// sandboxListing is the document `idemgate sandbox --json` prints first,
// as far as the soak reads it.
type sandboxListing struct {
	Emulators []struct {
		Name        string `json:"name"`
		URL         string `json:"url"`
		Credentials []struct {
			Name   string `json:"name"`
			Value  string `json:"value"`
			Type   string `json:"type"`
			Secret bool   `json:"secret"`
		} `json:"credentials"`
		Adapter map[string]any `json:"adapter"`
	} `json:"emulators"`
}

// readSandbox reads the sandbox's JSON listing from r. A credential is a
// secret when the listing types it so (its type is one of the adapters'
// credential types); the soak then looks for its value wherever no secret
// may be.
func readSandbox(r io.Reader) (sandboxInfo, error) {
	info := sandboxInfo{urls: map[string]string{}, adapters: map[string]map[string]any{}}
	var l sandboxListing
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := dec.Decode(&l); err != nil {
		return info, fmt.Errorf("idemgate sandbox --json: %w", err)
	}
	for _, e := range l.Emulators {
		info.urls[e.Name] = e.URL
		if e.Adapter != nil {
			info.adapters[e.Name] = e.Adapter
		}
		for _, c := range e.Credentials {
			if c.Secret {
				info.secrets = append(info.secrets, c.Value)
			}
		}
	}
	if len(info.urls) == 0 || len(info.adapters) == 0 {
		return info, errors.New("idemgate sandbox --json: no emulators or no adapter blocks")
	}
	return info, nil
}

// adapterYAML writes emulator name's adapter block as YAML under
// "adapters:" (two spaces, its keys four), keys in order; JSON scalars are
// YAML scalars.
func (i sandboxInfo) adapterYAML(name string) (string, error) {
	block, ok := i.adapters[name]
	if !ok {
		return "", fmt.Errorf("idemgate sandbox --json: no adapter block for %s", name)
	}
	keys := make([]string, 0, len(block))
	for k := range block {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n", name)
	for _, k := range keys {
		v, err := json.Marshal(block[k])
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "    %s: %s\n", k, v)
	}
	return b.String(), nil
}
