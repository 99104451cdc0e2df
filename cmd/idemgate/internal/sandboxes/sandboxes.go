// Package sandboxes is the list of target emulators `idemgate sandbox`
// serves, and how a person reaches each: URL, contract, credentials and a
// configuration block for idemgate.
//
// The list is explicit, as the adapters' is (cmd/idemgate/adapterset.go):
// adding an emulator means adding it to All and to Describe, and nothing
// registers itself at init.
//
// Imports: sandbox, the six emulator packages and the generic emulator of
// declared targets; private to the binary.
package sandboxes

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/sandbox"
	sbamocrm "github.com/idemgate/idemgate/sandbox/amocrm"
	sbbitrix24 "github.com/idemgate/idemgate/sandbox/bitrix24"
	"github.com/idemgate/idemgate/sandbox/generic"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
	sbstripe "github.com/idemgate/idemgate/sandbox/stripe"
	sbtbank "github.com/idemgate/idemgate/sandbox/tbank"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// Tuning sets what one emulator models beyond the shared options.
type Tuning struct {
	// Bitrix24Plan is the emulated portal's plan (sbbitrix24.PlanStandard,
	// the default, or PlanEnterprise): its REST rate limit.
	Bitrix24Plan string
}

// All builds every target emulator with the shared options (and at most one
// Tuning), not started, in a fixed order. An unknown plan is an error.
func All(opts sandbox.Options, tune ...Tuning) (sandbox.Group, error) {
	var t Tuning
	if len(tune) > 0 {
		t = tune[0]
	}
	b24 := sbbitrix24.Options{Options: opts}
	if t.Bitrix24Plan != "" {
		var err error
		if b24.Bucket, b24.LeakPerSec, err = sbbitrix24.PlanLimits(t.Bitrix24Plan); err != nil {
			return nil, err
		}
	}
	return sandbox.Group{
		sbonec.New(sbonec.Options{Options: opts}),
		sbbitrix24.New(b24),
		sbamocrm.New(sbamocrm.Options{Options: opts}),
		sbyookassa.New(sbyookassa.Options{Options: opts}),
		sbtbank.New(sbtbank.Options{Options: opts}),
		sbstripe.New(sbstripe.Options{Options: opts}),
	}, nil
}

// Credential is one test credential of an emulator. Name is the key its
// adapter's configuration gives it (shop_id, secret_key), or "token" for a
// declared target's bearer token.
type Credential struct {
	Name, Value string
}

// Setting is one key of the adapters.<name> block pointing idemgate at an
// emulator: a string or an int64.
type Setting struct {
	Key   string
	Value any
}

// TargetInfo tells a person how to use a running emulator.
type TargetInfo struct {
	// Name is the registry name, e.g. "yookassa".
	Name string
	// URL is the base URL; the admin API is under URL + "/_sandbox/".
	URL string
	// Endpoints are the contract's entry points, e.g. "POST <url>/v3/payments".
	Endpoints []string
	// Auth says how the credentials travel.
	Auth        string
	Credentials []Credential
	// Config is the adapters.<name> block of an idemgate configuration
	// pointing at this emulator, in order.
	Config []Setting
}

// Describe returns how to reach a started emulator. Emulators this package
// does not know are described by name and URL only.
func Describe(t sandbox.Target) TargetInfo {
	u := t.URL()
	info := TargetInfo{Name: t.Name(), URL: u}
	switch s := t.(type) {
	case *sbyookassa.Server:
		shop, secret := s.Credentials()
		info.Endpoints = []string{"POST " + u + "/v3/payments", "GET  " + u + "/v3/payments[/{id}]", "POST " + u + "/v3/refunds"}
		info.Auth = "HTTP Basic (shop id : secret key), Idempotence-Key header"
		info.Credentials = []Credential{{"shop_id", shop}, {"secret_key", secret}}
		info.Config = []Setting{{"base_url", u}, {"shop_id", shop}, {"secret_key", secret}}
	case *sbtbank.Server:
		term, pass := s.Credentials()
		info.Endpoints = []string{"POST " + u + "/v2/Init", "POST " + u + "/v2/Charge", "POST " + u + "/v2/CheckOrder", "POST " + u + "/v2/GetState"}
		info.Auth = "Token field: SHA-256 signature of the request with the terminal password"
		info.Credentials = []Credential{{"terminal_key", term}, {"password", pass}}
		info.Config = []Setting{{"base_url", u}, {"terminal_key", term}, {"password", pass}}
	case *sbstripe.Server:
		key := s.SecretKey()
		info.Endpoints = []string{"POST " + u + "/v1/payment_intents", "GET  " + u + "/v1/payment_intents/search", "POST " + u + "/v1/refunds"}
		info.Auth = "Bearer secret key, Idempotency-Key header"
		info.Credentials = []Credential{{"secret_key", key}}
		info.Config = []Setting{{"base_url", u}, {"secret_key", key}}
	case *sbonec.Server:
		user, pass := s.Credentials()
		base := s.BaseURL()
		info.Endpoints = []string{"POST " + base + "/hs/integration/invoices (Idempotency-Key header)",
			"GET  " + base + "/hs/integration/invoices/{key}", "OData " + base + "/odata/standard.odata/"}
		info.Auth = "HTTP Basic (infobase user)"
		info.Credentials = []Credential{{"user", user}, {"password", pass}}
		info.Config = []Setting{{"base_url", base}, {"user", user}, {"password", pass}}
	case *sbbitrix24.Server:
		uid, code := s.Credentials()
		info.Endpoints = []string{"POST " + s.WebhookURL() + "/{method}.json (crm.deal.add, crm.activity.add, crm.*.list)"}
		info.Auth = "inbound webhook: user id and code in the path"
		info.Credentials = []Credential{{"user_id", uid}, {"webhook_code", code}}
		info.Config = []Setting{{"portal_url", u}, {"user_id", uid}, {"webhook_code", code}}
	case *generic.Server:
		sp := s.Spec()
		info.Endpoints = []string{sp.CreateMethod + " " + u + sp.CreatePath}
		if sp.GetPath != "" {
			info.Endpoints = append(info.Endpoints, "GET  "+u+sp.GetPath)
		}
		if sp.SearchPath != "" {
			info.Endpoints = append(info.Endpoints, "GET  "+u+sp.SearchPath)
		}
		info.Auth = "declared target: set adapters.http." + sp.Name + ".base_url to " + u
		if sp.Token != "" {
			info.Auth += "; Bearer token (put it in the declared secret_env or secret_file)"
			info.Credentials = []Credential{{"token", sp.Token}}
		}
	case *sbamocrm.Server:
		info.Endpoints = []string{"POST " + u + "/api/v4/leads", "GET  " + u + "/api/v4/leads", "POST " + u + "/api/v4/tasks", "GET  " + u + "/api/v4/tasks"}
		info.Auth = "Bearer long-lived token"
		info.Credentials = []Credential{{"token", s.Token()}, {"key_field_id", strconv.FormatInt(s.KeyFieldID(), 10)}}
		info.Config = []Setting{{"base_url", u}, {"token", s.Token()}, {"key_field_id", s.KeyFieldID()}}
	}
	return info
}

// yamlValue writes a setting's value as YAML: a URL and a number bare,
// any other string quoted.
func yamlValue(v any) string {
	switch v := v.(type) {
	case string:
		if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
			return v
		}
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprint(v)
}

// WriteTargets prints each emulator's URL, contract, admin API, test
// credentials and a configuration block for idemgate.
func WriteTargets(w io.Writer, infos []TargetInfo) error {
	ew := new(strings.Builder)
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	for i, in := range infos {
		if i > 0 {
			fmt.Fprintln(ew)
		}
		fmt.Fprintf(ew, "%s  %s\n", in.Name, in.URL)
		for _, e := range in.Endpoints {
			fmt.Fprintf(ew, "    api    %s\n", e)
		}
		if in.Auth != "" {
			fmt.Fprintf(ew, "    auth   %s\n", in.Auth)
		}
		if len(in.Credentials) > 0 {
			parts := make([]string, 0, len(in.Credentials))
			for _, c := range in.Credentials {
				parts = append(parts, c.Name+"="+c.Value)
			}
			fmt.Fprintf(ew, "    test credentials (sandbox only)  %s\n", strings.Join(parts, "  "))
		}
		fmt.Fprintf(ew, "    admin  GET  %s/_sandbox/ledger[?key=K]   effects counted per key\n", in.URL)
		fmt.Fprintf(ew, "           GET|POST|DELETE %s/_sandbox/faults   e.g. {\"kind\":\"http_503\",\"count\":1}\n", in.URL)
		fmt.Fprintf(ew, "           POST %s/_sandbox/reset\n", in.URL)
	}
	var cfg []TargetInfo
	for _, in := range infos {
		if len(in.Config) > 0 {
			cfg = append(cfg, in)
		}
	}
	if len(cfg) > 0 {
		fmt.Fprintln(ew, "\nidemgate configuration for these emulators:")
		fmt.Fprintln(ew)
		WriteAdapters(ew, cfg)
	}
	_, err := io.WriteString(w, ew.String())
	return err
}

// WriteAdapters writes the adapters: block of an idemgate configuration
// pointing at the emulators that have one, in name order.
func WriteAdapters(w io.Writer, infos []TargetInfo) {
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	fmt.Fprintln(w, "adapters:")
	for _, in := range infos {
		if len(in.Config) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s:\n", in.Name)
		for _, st := range in.Config {
			fmt.Fprintf(w, "    %s: %s\n", st.Key, yamlValue(st.Value))
		}
	}
}

// Listing is what `idemgate sandbox --json` prints, as one JSON document:
// every started emulator, by name.
type Listing struct {
	Emulators []EmulatorJSON `json:"emulators"`
}

// EmulatorJSON is one emulator in a Listing.
type EmulatorJSON struct {
	Name string `json:"name"`
	// URL is the base URL; Admin the admin API's (ledger, faults, reset).
	URL   string `json:"url"`
	Admin string `json:"admin"`
	// Endpoints and Auth are as the banner prints them.
	Endpoints []string `json:"endpoints"`
	Auth      string   `json:"auth,omitempty"`
	// Credentials are the emulator's test credentials, each typed.
	Credentials []CredentialJSON `json:"credentials"`
	// Adapter is the adapters.<name> block pointing idemgate at the
	// emulator (absent for a declared target: its block is the declaration).
	Adapter map[string]any `json:"adapter,omitempty"`
}

// CredentialJSON is one typed test credential. Type is the credential's
// word in its adapter's configuration when it is a secret there (token,
// password, secret_key, webhook_code: adapters.Token, Password, SecretKey,
// WebhookCode), else "identifier" (a shop id, a user, a field id);
// Secret says which, for a reader that must keep secrets out of what it
// writes.
type CredentialJSON struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Type   string `json:"type"`
	Secret bool   `json:"secret"`
}

// WriteJSON writes the Listing of infos, in name order; typeOf gives each
// credential's type and whether it is a secret.
func WriteJSON(w io.Writer, infos []TargetInfo, typeOf func(target, credential string) (typ string, secret bool)) error {
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	l := Listing{Emulators: make([]EmulatorJSON, 0, len(infos))}
	for _, in := range infos {
		e := EmulatorJSON{Name: in.Name, URL: in.URL, Admin: in.URL + "/_sandbox", Endpoints: in.Endpoints, Auth: in.Auth,
			Credentials: make([]CredentialJSON, 0, len(in.Credentials))}
		for _, c := range in.Credentials {
			typ, secret := typeOf(in.Name, c.Name)
			e.Credentials = append(e.Credentials, CredentialJSON{Name: c.Name, Value: c.Value, Type: typ, Secret: secret})
		}
		if len(in.Config) > 0 {
			e.Adapter = make(map[string]any, len(in.Config))
			for _, st := range in.Config {
				e.Adapter[st.Key] = st.Value
			}
		}
		l.Emulators = append(l.Emulators, e)
	}
	return json.NewEncoder(w).Encode(l)
}
