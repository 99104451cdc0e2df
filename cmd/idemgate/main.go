// Command idemgate is the idemgate daemon and its tools: run, migrate,
// publish, trace, resolve, reconcile, ingest, sandbox, demo and version.
//
// It is the composition root: it may import every package of the module,
// and it is the only one that reads the configuration (viper) and sets up
// tracing (otelsetup), which deps_test.go enforces. Nothing imports it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/internal/telemetry"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/redact"
)

// Exit codes, as docs/operating.md tabulates them (TestExitCodesTable
// holds the table to these constants).
const (
	exitOK                = 0
	exitFailure           = 1
	exitUsage             = 2  // an unknown command or flag, a wrong count of arguments, a command refused before it is sent
	exitMigrationsPending = 3  // migrate status --check: migrations are pending
	exitUnknown           = 4  // trace, resolve, approve, deny: no such key
	exitConfig            = 78 // sysexits EX_CONFIG: a restart would not help
	// publish --wait: one code per result status that is not succeeded.
	exitFailedFinal = 5 // failed_final: the target refused for good
	exitConflict    = 6 // conflict: the key was first used with another payload
	exitRejected    = 7 // rejected: the daemon refused the command
	exitPending     = 8 // pending: no final result within --timeout (the command stays queued)
)

// exitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func configError(err error) error { return &exitError{code: exitConfig, err: err} }

func main() {
	stopProfile := startProfile(os.Getenv(profileEnv), os.Stderr)
	code := run(signalContext(), os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	os.Exit(code)
}

// profileEnv names a folder for profiles of the whole process (off when
// unset): cpu.pprof, and allocs.pprof written at exit. scripts/e2ebench
// -profile sets it for the daemon it runs.
const profileEnv = "IDEMGATE_PROFILE_DIR"

// startProfile writes a CPU profile to dir/cpu.pprof until the returned
// stop, which then writes the allocation profile to dir/allocs.pprof; with
// dir empty, or when the files cannot be made (said on stderr), it does
// nothing.
func startProfile(dir string, stderr io.Writer) (stop func()) {
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "idemgate: no profile:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		a, err := os.Create(filepath.Join(dir, "allocs.pprof"))
		if err == nil {
			err = errors.Join(pprof.Lookup("allocs").WriteTo(a, 0), a.Close())
		}
		if err != nil {
			fmt.Fprintln(stderr, "idemgate: no allocation profile:", err)
		}
	}
}

// signalContext ends at the first SIGINT/SIGTERM, which drains gracefully;
// a second one aborts the process at once (exit 1).
func signalContext() context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
		second := make(chan os.Signal, 1)
		signal.Notify(second, os.Interrupt, syscall.SIGTERM)
		<-second
		fmt.Fprintln(os.Stderr, "idemgate: second signal, aborting")
		os.Exit(exitFailure)
	}()
	return ctx
}

// run is the whole program, callable from tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "idemgate:", redact.String(err.Error()))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// newRoot builds the command tree.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "idemgate",
		Short:         "At most one business effect per intent, for AI agents acting on 1C, CRMs and payments",
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (YAML); default ./idemgate.yaml (or .yml), ~/.config/idemgate/config.yaml, /etc/idemgate/config.yaml")
	pf.String("env", "", "environment, the first part of every operation key")
	pf.String("data-dir", "", "folder for the embedded NATS store and SQLite journal")
	pf.String("nats-url", "", "NATS URL; empty runs an embedded JetStream server")
	pf.String("journal-url", "", "PostgreSQL URL; empty uses the SQLite journal in the data folder")
	pf.String("log-level", "", "debug, info, warn or error")
	pf.String("log-format", "", "json or text")
	root.AddCommand(runCmd(stderr), migrateCmd(stdout), publishCmd(stdout, stderr), traceCmd(stdout),
		resolveCmd(stdout), approveCmd(stdout, journal.VoteApprove), approveCmd(stdout, journal.VoteDeny), reconcileCmd(stdout, stderr), ingestCmd(stderr), demoCmd(stdout, stderr),
		sandboxCmd(stdout, stderr), versionCmd(stdout), mcpCmd(stderr))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: exitUsage, err: err} })
	usageErrors(root)
	return root
}

// usageErrors makes every argument error in the tree a usage error (exit
// 2): a wrong count of arguments, and an unknown command — which a command
// made only of subcommands (the root, migrate) would otherwise answer with
// its help and exit 0 (below the root) or exit 1 (cobra's own error). Such a
// command given no arguments still prints its help.
func usageErrors(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		usageErrors(sub)
	}
	switch {
	case cmd.HasSubCommands() && !cmd.Runnable():
		cmd.Args = unknownCommand
		cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	case cmd.Args == nil:
		cmd.Args = cobra.NoArgs
	}
	check := cmd.Args
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		return nil
	}
}

// unknownCommand refuses any argument of a command made of subcommands:
// cobra found no subcommand by that name.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		err = fmt.Errorf("%w (did you mean %s?)", err, strings.Join(s, " or "))
	}
	return err
}

// newLogger builds the JSON (or text) logger on stderr, through the redactor.
func newLogger(c Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Log.Level))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: redact.ReplaceAttr}
	var h slog.Handler
	if c.Log.Format == "text" {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	// Records logged with a span's context carry its trace_id and span_id.
	return slog.New(telemetry.NewLogHandler(h)).With("service", "idemgate")
}

// serving sets up a long-running subcommand (run, ingest, mcp) the one way
// they share: it reads the configuration, lets check refuse or adjust it
// (nil: no check), logs through the redactor on stderr, traces when the
// OTEL_* environment asks, then runs serve until it returns.
func serving(cmd *cobra.Command, stderr io.Writer, check func(*Config) error, serve func(ctx context.Context, c Config, log *slog.Logger) error) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := config(cmd)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(&c); err != nil {
				return err
			}
		}
		log := newLogger(c, stderr)
		stopTracing, err := startTracing(cmd.Context(), log)
		if err != nil {
			return err
		}
		defer stopTracing()
		return serve(cmd.Context(), c, log)
	}
	return cmd
}

// config loads and validates the configuration of a command.
func config(cmd *cobra.Command) (Config, error) {
	c, err := loadConfig(cmd.Flags())
	if err != nil {
		return c, configError(err)
	}
	if err := c.validate(); err != nil {
		return c, configError(err)
	}
	return c, nil
}
