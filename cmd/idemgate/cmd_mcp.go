package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/gateway/httpapi"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/gateway/openapi"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/redact"
)

// faceConfig is the listener of one of the agents' front doors: mcp
// (Streamable HTTP at /mcp) or http_api (/v1/operations).
type faceConfig struct {
	// Enabled serves it inside `idemgate run`.
	Enabled bool `mapstructure:"enabled"`
	// Addr is the listen address; a non-loopback one needs Token.
	Addr string `mapstructure:"addr"`
	// Token is the bearer token every request must carry
	// (IDEMGATE_MCP_TOKEN, IDEMGATE_HTTP_API_TOKEN). Empty: no check,
	// allowed on loopback only.
	Token redact.Secret `mapstructure:"token"`
	// MaxBody is the largest request body, in bytes (413 beyond it).
	MaxBody int64 `mapstructure:"max_body"`
}

// mcpConfig is the MCP face's listener and the browser origins it admits.
type mcpConfig struct {
	// Listener is what the MCP face shares with the HTTP API's.
	Listener faceConfig `mapstructure:",squash"`
	// AllowedOrigins are the browser origins (scheme://host[:port]; no port:
	// any; "*": any origin) whose requests are served: a request with
	// another Origin header is refused 403, against DNS rebinding; one
	// without the header (a client that is not a browser) is served.
	// Default: the loopback names, any port.
	AllowedOrigins []string `mapstructure:"allowed_origins"`
	// TaskWait bounds how long a call from a client that declared the MCP
	// Tasks extension waits for its outcome before it is answered with a
	// task (docs/agents.md). Default 2s.
	TaskWait time.Duration `mapstructure:"task_wait"`
	// ElicitApprovals asks the user of a client that supports URL-mode
	// elicitation to open the approval page when a call waits for a
	// person (docs/approvals.md). Default false: the answer carries the
	// link either way.
	ElicitApprovals bool `mapstructure:"elicit_approvals"`
	// ElicitWait bounds the wait for the decision after the user opened
	// the page. Default 2m.
	ElicitWait time.Duration `mapstructure:"elicit_wait"`
}

// faceDefaults fill the gateway's and the faces' sections of defaults().
func faceDefaults(c *Config) {
	g := gateway.Config{}.WithDefaults()
	// Only the keys of the gateway: section; gatewayConfig adds the rest.
	// wait stays 0: gatewayConfig derives it from worker.call_timeout.
	c.Gateway = gateway.Config{MaxWait: g.MaxWait, PollAfter: g.PollAfter, PublishTimeout: g.PublishTimeout, TaskTTL: g.TaskTTL}
	c.MCP = mcpConfig{Listener: faceConfig{Addr: "127.0.0.1:8090", MaxBody: 1 << 20},
		AllowedOrigins: slices.Clone(gwmcp.DefaultAllowedOrigins), TaskWait: gwmcp.DefaultTaskWait, ElicitWait: 2 * time.Minute}
	c.HTTPAPI = faceConfig{Addr: "127.0.0.1:8091", MaxBody: 64 << 10}
}

// gatewayConfig is the gateway's configuration: its own section plus the
// daemon's env, the reconciler's horizons and the worker's call_timeout, so
// both tell one story. gateway.wait left 0 covers a call and the lookup of
// a lost answer (gateway.CoverWait).
func (c Config) gatewayConfig() gateway.Config {
	g := c.Gateway
	g.Env = c.Env
	g.CallTimeout = c.Worker.WithDefaults().CallTimeout
	g.ReviewAfter = c.Reconciler.ReviewAfter
	g.IdleAfter = c.Reconciler.IdleAfter
	g.TaskReplicas = c.NATS.Replicas
	return g.WithDefaults()
}

// validateFaces refuses a gateway or an enabled face that is unsafe to
// serve: a non-loopback address without a bearer token.
func (c Config) validateFaces() []error {
	var errs []error
	if err := c.gatewayConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := gwmcp.ValidateOrigins(c.MCP.AllowedOrigins); err != nil {
		errs = append(errs, fmt.Errorf("mcp.allowed_origins: %w", err))
	}
	if c.MCP.TaskWait <= 0 || c.MCP.TaskWait > c.gatewayConfig().MaxWait {
		errs = append(errs, fmt.Errorf("mcp.task_wait %v: must be positive and at most gateway.max_wait (%v)", c.MCP.TaskWait, c.gatewayConfig().MaxWait))
	}
	for name, f := range map[string]faceConfig{"mcp": c.MCP.Listener, "http_api": c.HTTPAPI} {
		if !f.Enabled {
			continue
		}
		if err := gateway.ValidateListen(f.Addr, f.Token); err != nil {
			errs = append(errs, fmt.Errorf("unsafe: %s.addr: %w (set %s.token or IDEMGATE_%s_TOKEN)", name, err, name, upper(name)))
		}
		if f.MaxBody < 1 {
			errs = append(errs, fmt.Errorf("%s.max_body %d: at least 1", name, f.MaxBody))
		}
	}
	return errs
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func mcpCmd(stderr io.Writer) *cobra.Command {
	var transport, addr string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the operations as MCP tools to an agent (stdio for a client that launches it, or Streamable HTTP at /mcp)",
		Long: `mcp serves one MCP tool per routed operation type (payment_charge, invoice_create, …) plus
get_operation and list_unresolved, in front of a running daemon: it publishes
commands to its JetStream and reads its journal. Give it the daemon's
configuration: the types its routes: name are the ones offered.

--transport stdio (the default) speaks MCP on stdin/stdout: an MCP client launches
"idemgate mcp --config …". Logs go to stderr. --transport http serves Streamable
HTTP at /mcp on mcp.addr (or --addr); a non-loopback address needs mcp.token,
and a browser's request is served only from mcp.allowed_origins.`,
	}
	check := func(c *Config) error {
		switch transport {
		case "stdio", "http":
		default:
			return &exitError{code: exitUsage, err: fmt.Errorf("--transport %q: stdio or http", transport)}
		}
		if addr != "" {
			c.MCP.Listener.Addr = addr
		}
		if transport == "http" {
			if err := gateway.ValidateListen(c.MCP.Listener.Addr, c.MCP.Listener.Token); err != nil {
				return configError(fmt.Errorf("unsafe: mcp.addr: %w (set mcp.token or IDEMGATE_MCP_TOKEN)", err))
			}
		}
		return nil
	}
	serving(cmd, stderr, check, func(ctx context.Context, c Config, log *slog.Logger) error {
		// The daemon's journal first: one that is not where this
		// configuration says is said at once, before any wait for NATS.
		store, _, err := openJournal(ctx, c, log, readJournal)
		if err != nil {
			return err
		}
		defer store.Close()
		// Commands wait in the stream until a daemon takes them.
		nc, _, stopNATS, err := commandStreams(ctx, c, log)
		if err != nil {
			return err
		}
		defer stopNATS()
		g, err := newGateway(c, nc, store, log)
		if err != nil {
			return err
		}
		defer g.Close()
		srv, err := gwmcp.NewServer(g, mcpOptions(c, log))
		if err != nil {
			return configError(err)
		}
		if transport == "stdio" {
			log.Info("mcp: serving on stdio", "tools", len(g.Types())+2)
			if err := srv.Run(ctx, &sdk.StdioTransport{}); err != nil && ctx.Err() == nil {
				return fmt.Errorf("mcp: %w", err)
			}
			return nil
		}
		f := &faces{log: log}
		defer f.stop()
		if err := f.serve("mcp", c.MCP.Listener, gwmcp.Path, mcpHandler(srv, c.MCP, log), &f.mcpAddr); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
	cmd.Flags().StringVar(&transport, "transport", "stdio", "stdio or http (Streamable HTTP at /mcp)")
	cmd.Flags().StringVar(&addr, "addr", "", "listen address for --transport http (default mcp.addr)")
	return cmd
}

func mcpHandler(srv *sdk.Server, mc mcpConfig, log *slog.Logger) http.Handler {
	origins := mc.AllowedOrigins
	if origins == nil {
		origins = []string{} // configured empty: no browser origin
	}
	return gwmcp.Handler(srv, gwmcp.HTTPOptions{Token: mc.Listener.Token, MaxBody: mc.Listener.MaxBody, Log: log, AllowedOrigins: origins})
}

// newGateway builds the gateway on a NATS connection and the journal.
func newGateway(c Config, nc *nats.Conn, store journal.Store, log *slog.Logger) (*gateway.Gateway, error) {
	reg, err := c.registry()
	if err != nil {
		return nil, configError(err)
	}
	procs, err := c.processes(reg)
	if err != nil {
		return nil, configError(err)
	}
	g, err := gateway.New(c.gatewayConfig(), gateway.Deps{NC: nc, ResultsStream: c.NATS.ResultsStream, Journal: store, Cancels: store,
		Log: log, Registry: reg, Routed: c.routedTypes(), Processes: procs, ApprovalURL: c.gatewayApprovalURL()})
	if err != nil {
		return nil, configError(err)
	}
	return g, nil
}

// routedTypes are the operation types routes: gives an adapter, sorted:
// the only ones the faces offer.
func (c Config) routedTypes() []string {
	out := make([]string, 0, len(c.Routes))
	for op := range c.Routes {
		out = append(out, op)
	}
	slices.Sort(out)
	return out
}

// faces are the front doors served inside `idemgate run`.
type faces struct {
	log      *slog.Logger
	gw       *gateway.Gateway
	servers  []*http.Server
	mcpAddr  string
	httpAddr string
	once     sync.Once
}

// startFaces serves the enabled faces on the daemon's NATS connection and
// journal.
func startFaces(c Config, nc *nats.Conn, store journal.Store, log *slog.Logger) (*faces, error) {
	f := &faces{log: log}
	if !c.MCP.Listener.Enabled && !c.HTTPAPI.Enabled {
		return f, nil
	}
	g, err := newGateway(c, nc, store, log)
	if err != nil {
		return f, err
	}
	f.gw = g
	if c.MCP.Listener.Enabled {
		srv, err := gwmcp.NewServer(g, mcpOptions(c, log))
		if err != nil {
			return f, configError(err)
		}
		if err := f.serve("mcp", c.MCP.Listener, gwmcp.Path, mcpHandler(srv, c.MCP, log), &f.mcpAddr); err != nil {
			return f, err
		}
	}
	if c.HTTPAPI.Enabled {
		hc := httpapi.Config{Token: c.HTTPAPI.Token, MaxBody: c.HTTPAPI.MaxBody}
		if c.Approvals.Enabled {
			reg, err := c.registry()
			if err != nil {
				return f, configError(err)
			}
			policy, err := c.Approvals.policy(reg)
			if err != nil {
				return f, configError(err)
			}
			hc.Approvals = &approval.Service{Store: store, Policy: policy, Approvers: c.Approvals.Approvers}
		}
		doc, err := openapi.Document(openapi.Spec{Env: c.Env, Version: readBuildInfo().Version, Types: g.Types(),
			Processes: g.Processes(), Approvals: hc.Approvals != nil})
		if err != nil {
			return f, configError(err)
		}
		hc.OpenAPI = doc
		h := httpapi.Handler(g, hc)
		if err := f.serve("http_api", c.HTTPAPI, "/", h, &f.httpAddr); err != nil {
			return f, err
		}
	}
	return f, nil
}

// serve listens on the face's address and serves h under path.
func (f *faces) serve(name string, fc faceConfig, path string, h http.Handler, addr *string) error {
	ln, err := net.Listen("tcp", fc.Addr)
	if err != nil {
		return fmt.Errorf("%s listener %s: %w", name, fc.Addr, err)
	}
	*addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	f.servers = append(f.servers, srv)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.log.Error(name+" server", "error", err.Error())
		}
	}()
	auth := "bearer token"
	if fc.Token == "" {
		auth = "none (loopback only)"
	}
	f.log.Info(name+" serving", "addr", *addr, "path", path, "auth", auth)
	return nil
}

// mcpOptions are the MCP server's options, the same for stdio and the
// listener: it reports the version `idemgate version` prints (packaging's
// -X main.version wins over the module version).
func mcpOptions(c Config, log *slog.Logger) gwmcp.Options {
	return gwmcp.Options{Version: readBuildInfo().Version, Log: log, TaskWait: c.MCP.TaskWait,
		ElicitApprovals: c.MCP.ElicitApprovals && c.Approvals.Enabled, ElicitWait: c.MCP.ElicitWait}
}

// stop closes the listeners (in-flight calls get a moment to answer) and
// the gateway; safe twice.
func (f *faces) stop() {
	f.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range f.servers {
			_ = s.Shutdown(ctx)
		}
		if f.gw != nil {
			f.gw.Close()
		}
	})
}
