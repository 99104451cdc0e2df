package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/wire"
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

type source struct {
	name      string
	cfg       Source
	allowed   []netip.Prefix
	secrets   []redact.Secret
	keys      [][]byte // Standard Webhooks keys, decoded
	routes    map[string]Route
	refetcher Refetcher
	counters  *counters
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

// outcome is what became of one webhook.
type outcome struct {
	status    int
	reason    Reason // set when status is not 200
	result    string // accepted, duplicate, unrouted (status 200)
	msg       string // safe text for the sender
	err       error  // safe detail for the log
	eventID   string
	eventType string
	operation string
}

func reject(status int, reason Reason, msg string, err error) outcome {
	return outcome{status: status, reason: reason, msg: msg, err: err}
}

func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	src, ok := s.sources[r.PathValue("source")]
	if !ok {
		s.counters[unknownSourceLabel].reject(ReasonUnknownSource)
		writeText(w, http.StatusNotFound, "unknown webhook source")
		return
	}
	start := s.now()
	out := s.handle(w, r, src)
	switch {
	case out.status == http.StatusOK:
		switch out.result {
		case "accepted":
			src.counters.accepted.Add(1)
		case "duplicate":
			src.counters.duplicate.Add(1)
		case "unrouted":
			src.counters.unrouted.Add(1)
		}
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.Debug("webhook "+out.result, "source", src.name, "event_id", out.eventID,
				"event_type", out.eventType, "operation", out.operation, "duration", s.now().Sub(start))
		}
		writeText(w, http.StatusOK, "OK")
	default:
		src.counters.reject(out.reason)
		level := slog.LevelWarn
		if out.status >= 500 {
			level = slog.LevelError
			w.Header().Set("Retry-After", "5")
		}
		attrs := []any{"source", src.name, "status", out.status, "reason", string(out.reason)}
		if out.eventID != "" {
			attrs = append(attrs, "event_id", out.eventID)
		}
		if out.operation != "" {
			attrs = append(attrs, "operation", out.operation)
		}
		if out.err != nil {
			attrs = append(attrs, "error", out.err.Error())
		}
		s.log.Log(r.Context(), level, "webhook rejected", attrs...)
		writeText(w, out.status, out.msg)
	}
}

func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

// handle runs one webhook through the steps of the package doc.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, src *source) outcome {
	if len(src.allowed) > 0 {
		addr, ok := ClientAddr(r, s.trusted)
		if !ok || !inPrefixes(addr, src.allowed) {
			return reject(http.StatusForbidden, ReasonAddress, "sender address not allowed", nil)
		}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return reject(http.StatusUnsupportedMediaType, ReasonContentType, "content type must be application/json", nil)
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return reject(http.StatusRequestEntityTooLarge, ReasonTooLarge, "body too large", nil)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return reject(http.StatusRequestEntityTooLarge, ReasonTooLarge, "body too large", nil)
		}
		return reject(http.StatusBadRequest, ReasonMalformed, "body could not be read", err)
	}

	// Verify the raw bytes before parsing them.
	now := s.now()
	var hdrID string
	switch src.cfg.Scheme {
	case SchemeStripe:
		err = VerifyStripe(r.Header.Get("Stripe-Signature"), body, src.secrets, now, src.cfg.Tolerance)
	case SchemeStandard:
		hdrID = r.Header.Get("webhook-id")
		err = VerifyStandard(hdrID, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"),
			body, src.keys, now, src.cfg.Tolerance)
	}
	if err != nil {
		return signatureReject(err)
	}
	doc, err := parseBody(body)
	if err != nil {
		return reject(http.StatusBadRequest, ReasonMalformed, err.Error(), nil)
	}
	if src.cfg.Scheme == SchemeTBank {
		if err := VerifyTBank(doc, src.cfg.TerminalKey, src.secrets); err != nil {
			return signatureReject(err)
		}
	}

	eventType, ok := lookupString(doc, src.cfg.EventTypePath)
	if !ok || eventType == "" {
		return reject(http.StatusBadRequest, ReasonMalformed, "no event type at "+src.cfg.EventTypePath, nil)
	}
	parts, err := eventIDParts(src.cfg.Scheme, doc, eventType, hdrID)
	if err != nil {
		return reject(http.StatusBadRequest, ReasonMalformed, err.Error(), nil)
	}
	eventID := EventID(src.name, parts...)
	route, routed := src.routes[eventType]
	if !routed {
		return outcome{status: http.StatusOK, result: "unrouted", eventID: eventID, eventType: eventType}
	}
	withEvent := func(o outcome) outcome {
		o.eventID, o.eventType, o.operation = eventID, eventType, route.Operation
		return o
	}

	if src.refetcher != nil {
		if o, ok := s.refetch(r.Context(), src, doc, eventType); !ok {
			return withEvent(o)
		}
	}

	body, err = s.command(src, route, doc, eventID)
	if err != nil {
		return withEvent(reject(http.StatusUnprocessableEntity, ReasonMapping,
			"the notification does not fit the configured route", err))
	}
	msg := nats.NewMsg(wire.CommandSubject(route.Operation))
	msg.Data = body
	msg.Header.Set(wire.HeaderSource, src.name)
	tctx, endSpan := traceCommand(r, msg, src.name, route.Operation)
	ctx, cancel := context.WithTimeout(tctx, s.cfg.PublishTimeout)
	defer cancel()
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(eventID), jetstream.WithExpectStream(s.cfg.CommandsStream))
	endSpan(err != nil)
	if err != nil {
		return withEvent(reject(http.StatusServiceUnavailable, ReasonPublishUnavailable,
			"queue unavailable, retry later", fmt.Errorf("publish: %w", err)))
	}
	if ack.Duplicate {
		return withEvent(outcome{status: http.StatusOK, result: "duplicate"})
	}
	return withEvent(outcome{status: http.StatusOK, result: "accepted"})
}

func signatureReject(err error) outcome {
	if errors.Is(err, ErrTimestampOutOfTolerance) {
		return reject(http.StatusUnauthorized, ReasonTimestamp, "signature timestamp outside the tolerance", err)
	}
	return reject(http.StatusUnauthorized, ReasonSignature, "signature does not verify", err)
}

// eventIDParts returns the parts of the stable event id (see EventID).
func eventIDParts(scheme string, doc map[string]any, eventType, hdrID string) ([]string, error) {
	var paths []string
	switch scheme {
	case SchemeStandard:
		return []string{hdrID}, nil
	case SchemeStripe:
		paths = []string{"id"}
	case SchemeYooKassa:
		id, ok := lookupString(doc, "object.id")
		if !ok || id == "" {
			return nil, errors.New("no object.id in the notification")
		}
		return []string{eventType, id}, nil
	case SchemeTBank:
		paths = []string{"PaymentId", "Status", "Amount"}
	}
	parts := make([]string, len(paths))
	for i, p := range paths {
		v, ok := lookupString(doc, p)
		if !ok || v == "" {
			return nil, fmt.Errorf("no %s in the notification", p)
		}
		parts[i] = v
	}
	return parts, nil
}

// refetch replaces doc["object"] with the provider's copy, after checking
// that the copy agrees with the notification. ok false means stop with o.
func (s *Server) refetch(ctx context.Context, src *source, doc map[string]any, eventType string) (o outcome, ok bool) {
	notified, isObj := doc["object"].(map[string]any)
	id, _ := lookupString(notified, "id")
	if !isObj || id == "" {
		return reject(http.StatusBadRequest, ReasonMalformed, "no object.id in the notification", nil), false
	}
	raw, err := src.refetcher.Refetch(ctx, ObjectRef{Source: src.name, EventType: eventType, ID: id})
	if errors.Is(err, ErrObjectNotFound) {
		return reject(http.StatusUnauthorized, ReasonNotTrusted, "object unknown to the provider", err), false
	}
	if err != nil {
		return reject(http.StatusServiceUnavailable, ReasonRefetchUnavailable, "provider unavailable, retry later", err), false
	}
	fetched, err := parseBody(raw)
	if err != nil {
		return reject(http.StatusServiceUnavailable, ReasonRefetchUnavailable, "provider unavailable, retry later",
			fmt.Errorf("re-fetched object: %w", err)), false
	}
	for _, p := range []string{"id", "status", "amount.value", "amount.currency"} {
		nv, nok := lookupString(notified, p)
		fv, fok := lookupString(fetched, p)
		if p == "id" || p == "status" {
			nok, fok = true, true // must agree, present or not
		}
		if nok && fok && nv != fv {
			return reject(http.StatusConflict, ReasonNotTrusted,
				"notification differs from the provider's object", fmt.Errorf("re-fetched %s differs", p)), false
		}
	}
	doc["object"] = fetched
	return outcome{}, true
}

// command builds and checks the command envelope of a routed webhook.
func (s *Server) command(src *source, route Route, doc map[string]any, eventID string) ([]byte, error) {
	payload, err := mapPayload(route, doc)
	if err != nil {
		return nil, err
	}
	cmd := operation.Command{EventID: eventID, Operation: route.Operation, KeyVersion: route.KeyVersion}
	if len(route.IntentPaths) > 0 {
		parts := make([]string, len(route.IntentPaths))
		for i, p := range route.IntentPaths {
			v, ok := lookupString(doc, p)
			if !ok || v == "" {
				return nil, &MappingError{Field: "intent_id", Reason: "path " + p + " not found in the body"}
			}
			parts[i] = v
		}
		cmd.IntentID = EventID(src.name, parts...)
	}
	cmd.Payload, err = json.Marshal(payload)
	if err != nil {
		return nil, &MappingError{Field: "payload", Reason: "cannot be encoded"}
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	// The daemon would reject what its decoder refuses: refuse it here, where
	// the sender can still retry once the route is fixed.
	if _, err := s.decoder.Decode(body); err != nil {
		return nil, err
	}
	return body, nil
}
