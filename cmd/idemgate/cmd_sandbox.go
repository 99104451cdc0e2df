package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/cmd/idemgate/internal/sandboxes"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
)

func sandboxCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		listen map[string]string
		seed   uint64
		quiet  bool
		plan   string
		asJSON bool
		write  string
	)
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run every target emulator (1C, Bitrix24, amoCRM, YooKassa, T-Bank, Stripe) on loopback ports until Ctrl-C",
		Long: `sandbox serves the emulators idemgate's tests and demo use, for manual
work: point adapters at them, send commands, inject faults and count effects.
Each emulator keeps its target's contract and serves an admin API:

  GET    /_sandbox/ledger[?key=K]   effects (objects created) per operation key
  GET    /_sandbox/faults           active fault rules
  POST   /_sandbox/faults           add rules, e.g. {"kind":"lose_response_close","count":1}
                                    or {"kind":"http_429","retry_after_ms":2000,"rate":0.2}
  DELETE /_sandbox/faults           clear the rules
  POST   /_sandbox/reset            clear faults, ledger and objects

The credentials printed are the emulators' fixed test credentials.

--json prints, instead of the banner, one JSON document for programs:
{"emulators": [{"name", "url", "admin", "endpoints", "auth",
"credentials": [{"name", "value", "type", "secret"}], "adapter": {...}}]}.
A credential's type is its word in the adapter's configuration when it is
a secret there (token, password, secret_key, webhook_code), "identifier"
otherwise; "adapter" is the adapters.<name> block for the emulator.

--write-config FILE writes a complete configuration for these emulators:
env test, a route for every built-in operation type, their adapters, and
the daemon's addresses spelled out (admin, embedded NATS, the HTTP API and
MCP, both turned on). Start the daemon with it (idemgate run --config
FILE) while the sandbox serves; the emulators' ports change at every
start, so the file is written again each time. A file not written by
idemgate sandbox is never overwritten. Declared targets (below) are not
written into it: their declarations are yours to add.

Targets declared under adapters.http in the configuration get a generic
emulator each, set by the same declaration (where the key goes, whether
it is honoured, lookup by key and search with the declared settle time as
its lag).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := sandbox.Options{Seed: seed, Logger: sandboxLogger(quiet, stderr)}
			c, err := loadConfig(cmd.Flags())
			if err != nil {
				return configError(err)
			}
			declared, err := declaredEmulators(c, opts)
			if err != nil {
				return configError(err)
			}
			return runSandbox(cmd.Context(), listen, opts, sandboxes.Tuning{Bitrix24Plan: plan}, asJSON, write, stdout, declared...)
		},
	}
	f := cmd.Flags()
	f.StringToStringVar(&listen, "listen", nil, "listen address per emulator, e.g. yookassa=127.0.0.1:8443 (the others take free loopback ports)")
	f.Uint64Var(&seed, "seed", 0, "seed of random-rate faults (the same seed and request order give the same faults)")
	f.BoolVar(&quiet, "quiet", false, "do not log injected and fired faults on stderr")
	f.BoolVar(&asJSON, "json", false, "print the started emulators as one JSON document (names, URLs, typed credentials, adapter blocks) instead of the banner")
	f.StringVar(&write, "write-config", "", "write a complete daemon configuration for these emulators to this file (HTTP API and MCP on); rewritten at every start")
	f.StringVar(&plan, "bitrix24-plan", "standard", "the Bitrix24 portal's plan, which sets its REST rate limit: standard (50 requests, leaking 2/s) or enterprise (250, leaking 5/s)")
	return cmd
}

func sandboxLogger(quiet bool, stderr io.Writer) *slog.Logger {
	if quiet {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// runSandbox starts every emulator of sandboxes.All and the declared
// targets' ones, prints how to use each (as JSON with asJSON), and serves
// until ctx ends.
func runSandbox(ctx context.Context, listen map[string]string, opts sandbox.Options, tune sandboxes.Tuning, asJSON bool, writeConfig string, stdout io.Writer, declared ...sandbox.Target) error {
	g, err := sandboxes.All(opts, tune)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--bitrix24-plan: %w", err)}
	}
	if writeConfig != "" {
		if err := checkSandboxConfigPath(writeConfig); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	g = append(g, declared...)
	if err := g.Start(listen); err != nil {
		if errors.Is(err, sandbox.ErrUnknownTarget) {
			return &exitError{code: exitUsage, err: fmt.Errorf("--listen: %w", err)}
		}
		return err
	}
	infos := make([]sandboxes.TargetInfo, 0, len(g))
	for _, t := range g {
		infos = append(infos, sandboxes.Describe(t))
	}
	var werr error
	if writeConfig != "" {
		if werr = os.WriteFile(writeConfig, sandboxConfig(infos), 0o600); werr != nil {
			return errors.Join(fmt.Errorf("--write-config: %w", werr), g.Close())
		}
	}
	if asJSON {
		werr = sandboxes.WriteJSON(stdout, infos, credentialType)
	} else {
		fmt.Fprintf(stdout, "idemgate sandbox: %d target emulators (test credentials only, nothing real is reached)\n\n", len(infos))
		werr = sandboxes.WriteTargets(stdout, infos)
		if writeConfig != "" {
			fmt.Fprintf(stdout, "\nWrote %s: start the daemon with  idemgate run --config %s\n", writeConfig, writeConfig)
		} else {
			fmt.Fprintln(stdout, "\nidemgate sandbox --write-config FILE writes a complete daemon configuration for these emulators.")
		}
		fmt.Fprintln(stdout, "\nServing; Ctrl-C stops.")
	}
	if werr != nil {
		return errors.Join(werr, g.Close())
	}
	<-ctx.Done()
	return g.Close()
}

// credentialType types an emulator's credential by the adapter
// configuration that holds it: the section of AdaptersConfig named like the
// emulator, and in it the field the credential names. A field of a
// credential type (adapters.Token, Password, SecretKey, WebhookCode: its
// value a redact.Secret) is a secret, typed by its word; any other field is
// an identifier. A declared target (no section of its own) has one
// credential, the secret its auth reads, a bearer token. A credential the
// configuration does not hold is taken for a secret: nothing that may be
// one is ever reported as not.
func credentialType(target, credential string) (string, bool) {
	sections := reflect.TypeFor[AdaptersConfig]()
	for i := range sections.NumField() {
		f := sections.Field(i)
		if f.Tag.Get("mapstructure") != target || f.Type.Kind() != reflect.Pointer {
			continue
		}
		t, ok := configField(f.Type.Elem(), credential)
		switch {
		case !ok:
			return "secret", true
		case t == reflect.TypeFor[redact.Secret]():
			return credential, true
		}
		return "identifier", false
	}
	return "token", true
}

// configField finds the field of config struct t that configuration key
// key sets, through squashed structs, and returns its type.
func configField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if tag == "" && opts == "squash" && f.Type.Kind() == reflect.Struct {
			if ft, ok := configField(f.Type, key); ok {
				return ft, true
			}
			continue
		}
		if tag == key {
			return f.Type, true
		}
	}
	return nil, false
}

// sandboxConfigHeader opens every file --write-config writes; a file that
// does not start with it is someone's own configuration and is left alone.
const sandboxConfigHeader = "# Written by `idemgate sandbox --write-config`"

// sandboxRoutes route each built-in operation type to the emulator that
// serves it in a written configuration.
var sandboxRoutes = []struct{ op, emulator string }{
	{"invoice.create", "onec"},
	{"invoice.cancel", "onec"},
	{"crm.task.create", "bitrix24"},
	{"crm.deal.create", "bitrix24"},
	{"payment.charge", "yookassa"},
	{"payment.refund", "yookassa"},
}

// checkSandboxConfigPath refuses to overwrite a file --write-config did
// not write.
func checkSandboxConfigPath(path string) error {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--write-config: %w", err)
	case len(b) > 0 && !strings.HasPrefix(string(b), sandboxConfigHeader):
		return fmt.Errorf("--write-config: %s exists and was not written by idemgate sandbox: remove it or name another file", path)
	}
	return nil
}

// sandboxConfig is a complete daemon configuration for the started
// emulators: every address the daemon listens on is written out, with the
// key that moves it, and the agents' faces are on. The addresses are the
// defaults (defaults()), on loopback, so no token is needed.
// sandboxApprovals is the approval policy the sandbox's file states: money
// above 50,000.00 RUB waits for a person, smaller amounts execute at once
// (the built-in default, without this, gates every charge and refund).
const sandboxApprovals = `# A person's approval (docs/approvals.md): a charge or refund above 50,000.00 RUB
# waits (next_action: await_approval) until ` + "`idemgate approve KEY --reason …`" + `.
approvals:
  types:
    payment.charge: {approval: above, above: {RUB: 5000000}}
    payment.refund: {approval: above, above: {RUB: 5000000}}
`

func sandboxConfig(infos []sandboxes.TargetInfo) []byte {
	d := defaults()
	var b strings.Builder
	fmt.Fprintf(&b, "%s for the emulators it serves now.\n", sandboxConfigHeader)
	b.WriteString("# Their ports change at every start, and the sandbox writes this file again.\n")
	b.WriteString("# Start the daemon with it: idemgate run --config <this file>\n")
	b.WriteString("env: test                      # the first part of every operation key\n")
	b.WriteString("log: {format: text}\n")
	fmt.Fprintf(&b, "admin: {addr: %q}      # /readyz, /metrics\n", d.Admin.Addr)
	fmt.Fprintf(&b, "nats: {embedded_addr: %q}   # publish, trace and idemgate mcp reach the daemon here\n", d.NATS.EmbeddedAddr)
	b.WriteString("# The agents' faces, both served by `idemgate run`:\n")
	fmt.Fprintf(&b, "http_api: {enabled: true, addr: %q}   # http://%s/v1/operations/{type}\n", d.HTTPAPI.Addr, d.HTTPAPI.Addr)
	fmt.Fprintf(&b, "mcp: {enabled: true, addr: %q}        # http://%s/mcp (Streamable HTTP)\n", d.MCP.Listener.Addr, d.MCP.Listener.Addr)
	served := map[string]bool{}
	for _, in := range infos {
		if len(in.Config) > 0 {
			served[in.Name] = true
		}
	}
	b.WriteString("routes:\n")
	for _, r := range sandboxRoutes {
		if served[r.emulator] {
			fmt.Fprintf(&b, "  %s: %s\n", r.op, r.emulator)
		}
	}
	sandboxes.WriteAdapters(&b, infos)
	b.WriteString(sandboxApprovals)
	return []byte(b.String())
}
