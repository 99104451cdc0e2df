package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/operation"
)

// validationEnv is the environment used to check commands before they are
// published: ingest does not know the daemon's env, so it uses the longest
// one allowed, and a command that passes here passes under any env.
var validationEnv = strings.Repeat("e", operation.MaxEnvLen)

// ErrStarted is returned by Start on a server already started (a Server is
// started once).
var ErrStarted = fmt.Errorf("ingest server %w", startstop.ErrAlreadyStarted)

// Option changes how New builds a Server.
type Option func(*options)

type options struct {
	clock      func() time.Time
	registry   *operation.Registry
	refetchers map[string]Refetcher
	registerer prometheus.Registerer
	client     *http.Client
}

// WithClock sets the clock used for signature timestamps. Default time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithRegistry sets the operation types routes may name (and the daemon
// accepts). Default operation.DefaultRegistry().
func WithRegistry(r *operation.Registry) Option { return func(o *options) { o.registry = r } }

// WithRefetcher sets the Refetcher of a source, instead of the HTTP one its
// configuration describes; it also makes a source of another scheme
// re-fetch its objects.
func WithRefetcher(source string, r Refetcher) Option {
	return func(o *options) {
		if o.refetchers == nil {
			o.refetchers = map[string]Refetcher{}
		}
		o.refetchers[source] = r
	}
}

// WithRegisterer registers the server's counters (idemgate_webhook_*_total)
// with reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer = reg }
}

// WithHTTPClient sets the client of the configured YooKassa refetchers.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

// Server is the webhook ingestion server. Make it with New; serve its
// Handler from your own server, or run its own with Start and Stop.
type Server struct {
	cfg      Config
	js       jetstream.JetStream
	log      *slog.Logger
	now      func() time.Time
	trusted  []netip.Prefix
	sources  map[string]*source
	counters map[string]*counters // by source name, plus unknownSourceLabel
	decoder  operation.Decoder
	handler  http.Handler

	startstop.BaseStartStop
	mu   sync.Mutex
	addr string
}

// New checks cfg (after WithDefaults), reads its secret files, checks every
// route against the operation registry (the operation is registered, moves
// no money, and every required field is mapped) and returns a server that
// publishes to js. log nil discards logs.
func New(cfg Config, js jetstream.JetStream, log *slog.Logger, opts ...Option) (*Server, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: no JetStream", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := options{clock: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.registry == nil {
		o.registry = operation.DefaultRegistry()
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	trusted, _ := parsePrefixes(cfg.TrustedProxies) // checked by Validate
	s := &Server{
		cfg: cfg, js: js, log: log, now: o.clock, trusted: trusted,
		sources:  make(map[string]*source, len(cfg.Sources)),
		counters: map[string]*counters{unknownSourceLabel: {}},
		decoder:  operation.Decoder{Env: validationEnv, Registry: o.registry},
	}
	for name := range o.refetchers {
		if !sourceNamed(cfg.Sources, name) {
			return nil, fmt.Errorf("%w: refetcher given for unknown source %q", ErrInvalidConfig, name)
		}
	}
	for _, sc := range cfg.Sources {
		src, err := newSource(sc, o)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", sc.Name, err)
		}
		s.sources[sc.Name] = src
		s.counters[sc.Name] = src.counters
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks/{source}", s.serveWebhook)
	s.handler = mux
	if o.registerer != nil {
		if err := o.registerer.Register(collector{s}); err != nil {
			return nil, fmt.Errorf("register ingest metrics: %w", err)
		}
	}
	return s, nil
}

// Handler returns the server's handler: POST /webhooks/{source}.
func (s *Server) Handler() http.Handler { return s.handler }

// Stats returns the counts of one source, or of all sources for "".
func (s *Server) Stats(source string) Stats {
	var st Stats
	if source != "" {
		if c, ok := s.counters[source]; ok {
			c.add(&st)
		}
		return st
	}
	for _, c := range s.counters {
		c.add(&st)
	}
	return st
}

// Start listens on Config.Addr and serves in the background until ctx ends
// or Stop is called. It returns once the listener is bound (see Addr).
func (s *Server) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := s.StartInit(ctx)
	if !shouldStart {
		return ErrStarted
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		stopped()
		return fmt.Errorf("ingest listen %s: %w", s.cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.mu.Unlock()
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("ingest server stopped", "error", err)
		}
	}()
	go func() {
		started()
		defer stopped()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			s.log.Warn("ingest shutdown timed out; closing open connections", "error", err)
			_ = srv.Close()
		}
		<-serveDone
	}()
	s.log.Info("ingest listening", "addr", ln.Addr().String(), "sources", len(s.sources))
	return nil
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop stops a started server: it stops accepting, lets in-flight requests
// finish for up to Config.ShutdownTimeout, then closes what remains. It is
// safe to call twice, and before Start.
func (s *Server) Stop() { s.BaseStartStop.Stop() }

// ListenAndServe starts the server and serves until ctx ends, then stops it.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	s.Stop()
	return nil
}
