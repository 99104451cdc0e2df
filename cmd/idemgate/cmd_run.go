package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/worker"
)

func runCmd(stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: consume commands, execute each intent at most once, publish outcomes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config(cmd)
			if err != nil {
				return err
			}
			return runDaemon(cmd.Context(), c, newLogger(c, stderr), nil)
		},
	}
}

// daemon is a running idemgate: tests and the demo start it in-process.
type daemon struct {
	worker     *worker.Worker
	reconciler *worker.Reconciler
	janitor    *worker.Janitor
	admin      *http.Server
	adminAddr  string
	ingest     *ingest.Server
	faces      *faces
	ready      atomic.Bool
}

// runDaemon runs until ctx ends, then drains. started, when set, receives
// the running daemon.
func runDaemon(ctx context.Context, c Config, log *slog.Logger, started func(*daemon)) error {
	routes, err := buildAdapters(c, log)
	if err != nil {
		return configError(err)
	}
	if len(routes) == 0 {
		log.Warn("no routes configured: every command will be rejected as having no adapter (see routes: in the config)")
	}
	store, pending, err := openJournal(ctx, c, log, c.Journal.AutoMigrate)
	if err != nil {
		return err
	}
	defer store.Close()
	nc, js, stopNATS, err := natsConn(c, log, true)
	if err != nil {
		return err
	}
	defer stopNATS()
	cons, err := consumer.Ensure(ctx, js, c.NATS.Config)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := worker.NewMetrics(reg)
	deps := worker.Deps{
		Store: store, JS: js, NC: nc, Consumer: cons,
		Decoder:  &operation.Decoder{Env: c.Env},
		Adapters: routes, Log: log, Metrics: metrics,
		Redact: func(r json.RawMessage) json.RawMessage { return redact.JSON(r) },
	}
	w, err := worker.New(c.Worker, c.NATS.Config, deps)
	if err != nil {
		return configError(err)
	}
	rec, err := worker.NewReconciler(c.Reconciler, c.Worker, deps)
	if err != nil {
		return configError(err)
	}
	jan, err := worker.NewJanitor(worker.JanitorConfig{Retention: c.Journal.Retention, ByType: c.Journal.RetentionByType}, store, log)
	if err != nil {
		return configError(err)
	}
	d := &daemon{worker: w, reconciler: rec, janitor: jan}
	if c.Ingest.Enabled {
		srv, err := ingest.New(c.Ingest.Config, js, log, ingest.WithRegisterer(reg))
		if err != nil {
			return configError(err)
		}
		if err := srv.Start(ctx); err != nil {
			return err
		}
		defer srv.Stop()
		d.ingest = srv
		log.Info("webhook ingest", "addr", srv.Addr(), "sources", len(c.Ingest.Sources))
	}

	d.faces, err = startFaces(c, nc, store, log)
	defer d.faces.stop()
	if err != nil {
		return err
	}

	if c.Admin.Addr != "" {
		ln, err := net.Listen("tcp", c.Admin.Addr)
		if err != nil {
			return fmt.Errorf("admin listener %s: %w", c.Admin.Addr, err)
		}
		d.adminAddr = ln.Addr().String()
		d.admin = &http.Server{Handler: adminHandler(d, nc, pending, reg), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := d.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("admin server", "error", err.Error())
			}
		}()
		log.Info("admin endpoints", "addr", d.adminAddr, "paths", "/healthz /livez /readyz /metrics")
	}

	if err := w.Start(ctx); err != nil {
		return err
	}
	if err := rec.Start(ctx); err != nil {
		return err
	}
	if err := jan.Start(ctx); err != nil {
		return err
	}
	d.ready.Store(true)
	log.Info("idemgate running", "env", c.Env, "owner", w.Owner(), "routes", len(routes))
	if started != nil {
		started(d)
	}
	<-ctx.Done()

	// Drain: not ready, stop fetching, let in-flight work finish, never ack
	// anything unpublished.
	d.ready.Store(false)
	log.Info("draining")
	if d.ingest != nil {
		d.ingest.Stop() // senders get 503 and retry elsewhere or later
	}
	d.faces.stop() // agents' calls in flight answer pending; their commands stay in JetStream
	w.Stop()
	rec.Stop()
	jan.Stop()
	if d.admin != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.admin.Shutdown(sctx)
		cancel()
	}
	log.Info("stopped")
	return nil
}

// adminHandler serves liveness (the process only), readiness (NATS
// connected, journal migrated, not draining) and metrics.
func adminHandler(d *daemon, nc *nats.Conn, pending func() (bool, error), reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	live := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }
	mux.HandleFunc("GET /livez", live)
	mux.HandleFunc("GET /healthz", live)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		var problems []string
		if !d.ready.Load() {
			problems = append(problems, "not running (starting or draining)")
		}
		if !nc.IsConnected() {
			problems = append(problems, "nats not connected")
		}
		if p, err := pending(); err != nil || p {
			problems = append(problems, "journal migrations pending or journal unreachable")
		}
		if len(problems) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, p := range problems {
				_, _ = io.WriteString(w, p+"\n")
			}
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	return mux
}
