package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Options are the settings every emulator shares. Emulator option structs
// embed Options.
type Options struct {
	// Logger receives the emulator's own logs (faults fired, server errors).
	// Default: a logger that discards everything.
	Logger *slog.Logger
	// Clock stamps effects and drives rate limits and search lag.
	// Default: time.Now.
	Clock func() time.Time
	// Seed seeds the RNG of rate faults. Default 0 (deterministic).
	Seed uint64
	// MaxHang bounds FaultLoseResponseHang when the client never gives up.
	// Default 30s.
	MaxHang time.Duration
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.MaxHang <= 0 {
		o.MaxHang = 30 * time.Second
	}
	return o
}

// Spec is what an emulator gives NewCore.
type Spec struct {
	// Name is the emulator's registry name, e.g. "onec".
	Name string
	// Handler serves the target's contract. Default: a ServeMux of Routes.
	Handler http.Handler
	// Routes are the contract's ServeMux patterns ("POST /v3/payments") and
	// their handlers, each wrapped in Wrap when set (the target's
	// credential check). NotFound answers what no route matches (default:
	// the ServeMux's 404).
	Routes   map[string]http.HandlerFunc
	Wrap     func(http.HandlerFunc) http.HandlerFunc
	NotFound http.HandlerFunc
	// Classify tells which requests create objects (ScopeCreate) and which
	// only read (ScopeRead). Default: POST, PUT and PATCH create.
	Classify func(r *http.Request) Scope
	// WriteError writes the target's own error answer for an injected status
	// (429, 503, 500 after commit). The Retry-After header is already set
	// when retryAfter is not zero (RetryAfterSeconds gives its value for a
	// target that repeats it in the body). Default: a JSON body
	// {"error": "..."}.
	WriteError func(w http.ResponseWriter, r *http.Request, status int, retryAfter time.Duration)
	// OnReset clears the emulator's own state (objects, idempotency store,
	// rate buckets) on Reset. Called with no Core lock held.
	OnReset func()
}

// Core is the shared part of every emulator: the effects ledger, the fault
// rules, the admin API and the HTTP server. Emulator Server types embed it.
type Core struct {
	spec   Spec
	opts   Options
	ledger *Ledger
	faults *faultSet

	mu       sync.Mutex
	srv      *http.Server
	url      string
	closing  chan struct{}
	closed   bool
	serveErr chan error
}

// NewCore wraps an emulator's contract handler.
func NewCore(spec Spec, opts Options) *Core {
	opts = opts.WithDefaults()
	if spec.Classify == nil {
		spec.Classify = defaultClassify
	}
	if spec.WriteError == nil {
		spec.WriteError = defaultWriteError
	}
	if spec.Handler == nil {
		spec.Handler = spec.mux()
	}
	return &Core{
		spec:    spec,
		opts:    opts,
		ledger:  NewLedger(),
		faults:  newFaultSet(opts.Seed),
		closing: make(chan struct{}),
	}
}

// mux serves s.Routes.
func (s Spec) mux() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range s.Routes {
		if s.Wrap != nil {
			h = s.Wrap(h)
		}
		mux.HandleFunc(pattern, h)
	}
	if s.NotFound != nil {
		mux.HandleFunc("/", s.NotFound)
	}
	return mux
}

func defaultClassify(r *http.Request) Scope {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return ScopeCreate
	}
	return ScopeRead
}

func defaultWriteError(w http.ResponseWriter, _ *http.Request, status int, _ time.Duration) {
	WriteJSON(w, status, "", map[string]string{"error": http.StatusText(status)})
}

// writeError answers an injected status with the target's error body, after
// the Retry-After header when one was asked.
func (c *Core) writeError(w http.ResponseWriter, r *http.Request, status int, retryAfter time.Duration) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(retryAfter), 10))
	}
	c.spec.WriteError(w, r, status, retryAfter)
}

// RetryAfterSeconds is d in whole seconds, rounded up, as Retry-After
// carries it.
func RetryAfterSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// Name returns the emulator's name.
func (c *Core) Name() string { return c.spec.Name }

// Options returns the effective options (defaults applied).
func (c *Core) Options() Options { return c.opts }

// Now returns the emulator clock's time.
func (c *Core) Now() time.Time { return c.opts.Clock() }

// Ledger returns the effects ledger.
func (c *Core) Ledger() *Ledger { return c.ledger }

// Record records a real effect: an object created by the emulated target
// for key (the key the client sent, even if ignored).
func (c *Core) Record(ctx context.Context, key, kind, objectID string) Effect {
	return c.ledger.Record(Effect{Key: key, Kind: kind, ObjectID: objectID, KeyIgnored: KeyIgnored(ctx), At: c.opts.Clock()})
}

// Effects returns the number of real effects recorded for key.
func (c *Core) Effects(key string) int { return c.ledger.Count(key) }

// TotalEffects returns the number of real effects recorded.
func (c *Core) TotalEffects() int { return c.ledger.Total() }

// InjectFault adds a fault rule.
func (c *Core) InjectFault(f Fault) error {
	if err := c.faults.add(f); err != nil {
		return err
	}
	c.opts.Logger.Info("sandbox fault injected", "target_system", c.spec.Name, "fault", string(f.Kind), "count", f.Count, "rate", f.Rate)
	return nil
}

// ClearFaults removes every fault rule and re-seeds the RNG.
func (c *Core) ClearFaults() { c.faults.clear() }

// Reset clears faults, the ledger and the emulator's own state.
func (c *Core) Reset() {
	c.faults.clear()
	c.ledger.Reset()
	if c.spec.OnReset != nil {
		c.spec.OnReset()
	}
}

type ctxKey int

const ignoreKeyCtx ctxKey = 1

// KeyIgnored reports whether the ignore-key connector fault is active for the
// request whose context this is: the emulator must then act as if the client
// had sent no key.
func KeyIgnored(ctx context.Context) bool {
	v, _ := ctx.Value(ignoreKeyCtx).(bool)
	return v
}

// Handler returns the emulator's HTTP handler: the admin API under
// /_sandbox/ and the target contract with faults applied. It can be served by
// httptest.NewServer, but then call Close before closing that server so that
// hanging responses are released.
func (c *Core) Handler() http.Handler { return http.HandlerFunc(c.serveHTTP) }

func (c *Core) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Path) >= len(adminPrefix) && r.URL.Path[:len(adminPrefix)] == adminPrefix {
		c.serveAdmin(w, r)
		return
	}
	f, ok := c.faults.pick(c.spec.Classify(r))
	if !ok {
		c.spec.Handler.ServeHTTP(w, r)
		return
	}
	c.opts.Logger.Debug("sandbox fault fired", "target_system", c.spec.Name, "fault", string(f.Kind), "path", r.URL.Path)
	switch f.Kind {
	case FaultDelay:
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-c.closing:
			return
		}
		c.spec.Handler.ServeHTTP(w, r)
	case FaultHTTP429:
		c.writeError(w, r, http.StatusTooManyRequests, f.RetryAfter)
	case FaultHTTP503:
		c.writeError(w, r, http.StatusServiceUnavailable, f.RetryAfter)
	case FaultHTTP502:
		writeBadGateway(w)
	case FaultResetBefore:
		_, _ = io.Copy(io.Discard, r.Body)
		abort(w, true)
	case FaultIgnoreKey:
		c.spec.Handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ignoreKeyCtx, true)))
	case FaultRawResponse:
		if f.Commit {
			c.spec.Handler.ServeHTTP(newBuffer(), r)
		}
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, f.Body)
	default: // after-commit faults
		if f.DropKey {
			r = r.WithContext(context.WithValue(r.Context(), ignoreKeyCtx, true))
		}
		buf := newBuffer()
		c.spec.Handler.ServeHTTP(buf, r)
		c.spoil(w, r, f, buf)
	}
}

func (c *Core) spoil(w http.ResponseWriter, r *http.Request, f Fault, buf *bufferWriter) {
	switch f.Kind {
	case FaultLoseResponseHang:
		// The server notices a departed client only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		t := time.NewTimer(c.opts.MaxHang)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-c.closing:
		case <-t.C:
		}
		abort(w, false)
	case FaultLoseResponseClose:
		abort(w, false)
	case FaultResetAfterCommit:
		abort(w, true)
	case FaultHTTP500AfterCommit:
		c.writeError(w, r, http.StatusInternalServerError, 0)
	case FaultHTTP502AfterCommit:
		writeBadGateway(w)
	case FaultTruncateAfterCommit:
		body := buf.body[:len(buf.body)/2]
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(buf.statusCode())
		_, _ = w.Write(body)
	}
}

// writeBadGateway is a proxy's 502: a plain page, not the target's error body.
func writeBadGateway(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
}

// abort closes the client connection without an answer; with reset it sends
// a TCP RST instead of a FIN.
func abort(w http.ResponseWriter, reset bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// Not hijackable (HTTP/2, recorder): the closest is an aborted handler.
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// bufferWriter holds a committed response that a fault will spoil.
type bufferWriter struct {
	header http.Header
	status int
	body   []byte
}

func newBuffer() *bufferWriter { return &bufferWriter{header: make(http.Header)} }

func (b *bufferWriter) Header() http.Header { return b.header }
func (b *bufferWriter) WriteHeader(s int) {
	if b.status == 0 {
		b.status = s
	}
}
func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	b.body = append(b.body, p...)
	return len(p), nil
}
func (b *bufferWriter) statusCode() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// Start serves the emulator on addr ("" means "127.0.0.1:0", a free loopback
// port) and returns its base URL, e.g. "http://127.0.0.1:41234". It fails if
// the emulator was already started or closed.
func (c *Core) Start(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return "", fmt.Errorf("sandbox %s: %w", c.spec.Name, http.ErrServerClosed)
	}
	if c.srv != nil {
		return "", fmt.Errorf("sandbox %s: already started at %s", c.spec.Name, c.url)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("sandbox %s: listen %s: %w", c.spec.Name, addr, err)
	}
	c.srv = &http.Server{
		Handler:           c.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(c.opts.Logger.Handler(), slog.LevelDebug),
	}
	c.url = "http://" + ln.Addr().String()
	c.serveErr = make(chan error, 1)
	go func(srv *http.Server, errc chan<- error) {
		errc <- srv.Serve(ln)
	}(c.srv, c.serveErr)
	return c.url, nil
}

// URL returns the base URL after Start, or "".
func (c *Core) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.url
}

// Close releases hanging responses and stops the server started by Start.
// It is safe to call twice and without Start.
func (c *Core) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	srv, errc := c.srv, c.serveErr
	c.mu.Unlock()
	if srv == nil {
		return nil
	}
	// Close, not Shutdown: hanging responses are already released by
	// closing, and Shutdown would wait up to 5 s on idle client connections
	// that were opened but never used.
	err := srv.Close()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
