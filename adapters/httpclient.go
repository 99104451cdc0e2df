package adapters

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/crashpoint"
)

// Further safe codes used by the HTTP adapters (the configured rules map
// codes to classes; an unlisted code keeps the class the adapter gave it).
const (
	// CodeRequestNotSent: the request failed before any byte was written
	// (DNS, TLS handshake, context ended before sending). Class retry.
	CodeRequestNotSent = "request_not_sent"
	// CodeDuplicateObjects: the target holds more than one object for one key
	// (a CRM without uniqueness raced, or a connector dropped the key). The
	// adapter reports the oldest; the duplicates need an operator.
	CodeDuplicateObjects = "duplicate_objects"
	// CodeLookupUnsupported: the adapter's configured mode cannot look up.
	CodeLookupUnsupported = "lookup_unsupported"
	// CodeHTTP500BeforeWritten, CodeHTTP502BeforeWritten and
	// CodeHTTP504BeforeWritten: the answer came before the whole request
	// body was written, so the target cannot have acted on the request.
	// Class retry. The same statuses after the request was written keep
	// http_500, http_502 and http_504: they may follow a commit upstream.
	CodeHTTP500BeforeWritten = "http_500_before_request_written"
	CodeHTTP502BeforeWritten = "http_502_before_request_written"
	CodeHTTP504BeforeWritten = "http_504_before_request_written"
	// CodeHTTP5xxBeforeWritten: another 5xx before the request was written.
	CodeHTTP5xxBeforeWritten = "http_5xx_before_request_written"
)

// DefaultResponseLimit is the largest response body the HTTP helpers read.
const DefaultResponseLimit = 1 << 20

// DefaultIdleConns is the idle connection pool NewHTTPClient keeps per
// target when the number of calls that may run at once is not known.
const DefaultIdleConns = 256

// NewHTTPClient returns the *http.Client adapters use: a clone of the
// default transport (proxy from environment, keep-alives), the given overall
// timeout, and no redirect following (a 3xx is an unexpected answer, never a
// silently re-sent POST). It opens at most DefaultIdleConns connections per
// host and keeps them all for reuse.
//
// The Transport re-sends a request on a reused connection that closed before
// any answer when the request is "replayable": a GET, or any request carrying
// an Idempotency-Key header whose body can be rewound (Request.GetBody set).
// Against a target or connector that ignores the key that is a second effect
// nobody decided on, so build requests with NewRequest, which leaves GetBody
// nil: the failure then comes back to the adapter and the worker decides.
//
// When tracing is on, calls made within a trace get an HTTP client span
// (otelhttp) and carry the trace context to the target.
func NewHTTPClient(timeout time.Duration) *http.Client {
	return newHTTPClient(timeout, DefaultIdleConns, nil)
}

// newHTTPClient is NewHTTPClient with at most idle connections per host,
// all of which the idle pool keeps (every one may be toward the same host:
// MaxIdleConns and MaxIdleConnsPerHost alike) and dialed, when not nil, called for every new
// connection the Transport opens.
func newHTTPClient(timeout time.Duration, idle int, dialed func()) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Many operations run at once against one target. Go keeps two idle
	// connections per host and 100 in all by default: with more calls in
	// flight than that, every answer beyond them closes its connection and
	// the next call dials a new one. Keep as many as may be in flight, and
	// open no more than that: a call that finds every connection busy
	// waits for one (nothing sent yet) instead of dialing an extra one the
	// pool would close again.
	tr.MaxIdleConns = idle
	tr.MaxIdleConnsPerHost = idle
	tr.MaxConnsPerHost = idle
	if dialed != nil {
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err == nil {
				dialed()
			}
			return c, err
		}
	}
	return &http.Client{
		Transport: newTracedTransport(tr),
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// NewRequest builds a request whose body the Transport cannot rewind
// (GetBody is nil), so the Transport never re-sends it by itself. body may
// be nil.
func NewRequest(ctx context.Context, method, rawURL string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		// url.Parse errors quote the URL, which may hold a credential
		// (Bitrix24 webhook code): keep only the cause.
		return nil, NewError(CodeRequestNotSent, NeverRetry, fmt.Errorf("build %s request: %w", method, safeErr(err)))
	}
	if body != nil {
		req.Body = &onceReader{b: body}
		req.ContentLength = int64(len(body))
		req.GetBody = nil
	}
	return req, nil
}

// onceReader is a body that is not a *bytes.Reader, so net/http does not
// infer GetBody for it. (Send hands a small one to the Transport as an
// io.NopCloser of a *bytes.Reader, which does not infer GetBody either.)
type onceReader struct {
	b []byte
	i int
}

func (r *onceReader) Read(p []byte) (int, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.i:])
	r.i += n
	return n, nil
}

func (r *onceReader) Close() error { return nil }

// oneWriteBody is the largest body Send sends in the headers' write: with
// the headers it fits the Transport's 4 KiB write buffer.
const oneWriteBody = 2 << 10

// countingBody counts the bytes the Transport took from a request body. A
// byte not yet taken cannot have reached the target: an answer that comes
// while some are left came before the request was written.
type countingBody struct {
	rc  io.ReadCloser
	n   atomic.Int64
	eof atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }

// drained reports whether the whole body was taken: its length when
// known, else up to EOF.
func (b *countingBody) drained(length int64) bool {
	if length > 0 {
		return b.n.Load() >= length
	}
	return b.eof.Load()
}

// HTTPResponse is a read, size-limited answer. Body must never be logged or
// kept: adapters reduce it to an Outcome.
type HTTPResponse struct {
	StatusCode int
	Header     http.Header
	Body       []byte
	// EarlyAnswer is set when the answer began before the whole request
	// body had been handed to the connection: the target answered without
	// the request, so it cannot have acted on it. The zero value is the
	// safe assumption (the request may have been processed).
	EarlyAnswer bool
}

// Send performs req once with client, reads at most limit bytes of the
// answer (DefaultResponseLimit when limit <= 0) and classifies a transport
// failure as an *Error:
//
//   - nothing written yet: connection refused → retry connection_refused;
//     reset → retry connection_reset_before_response; anything else (DNS,
//     TLS, context ended) → retry request_not_sent;
//   - request written: timeout → reconcile_before_retry
//     timeout_after_request_sent; anything else (reset, EOF, cancel) →
//     reconcile_before_retry connection_lost_while_waiting_response;
//   - the body breaks off or exceeds the limit → reconcile_before_retry.
//
// Any HTTP status is returned as a response, not an error: use StatusError
// for the default classification of non-2xx answers. An answer that came
// before the whole body was written is marked EarlyAnswer (a body of up to
// 2 KiB made by NewRequest goes out in one write with the headers: an
// answer never comes before it). The client's Timeout bounds the exchange
// as a deadline on req's context. Errors never hold the URL (it may carry a
// credential) nor the body.
func Send(client *http.Client, req *http.Request, limit int64) (*HTTPResponse, error) {
	if limit <= 0 {
		limit = DefaultResponseLimit
	}
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteHeaders: func() { wrote.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true); crashpoint.Hit(crashpoint.RequestWritten) },
	}
	ctx := httptrace.WithClientTrace(req.Context(), trace)
	if client.Timeout > 0 {
		// The client's bound as the request's deadline: the same bound (the
		// answer is read before Send returns), without the timer goroutine
		// and cancel channel net/http adds to every request whose Transport
		// is not its own (ours is wrapped for tracing).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, client.Timeout)
		defer cancel()
		c := *client
		c.Timeout = 0
		client = &c
	}
	req = req.WithContext(ctx)
	var body *countingBody
	if once, ok := req.Body.(*onceReader); ok && once.i == 0 && len(once.b) <= oneWriteBody {
		// A small body NewRequest made goes out in the headers' write: as a
		// reader net/http knows to be in memory, it does not flush the
		// headers first (one write, not two). No answer can then begin
		// before the whole body was handed to the connection, so there is
		// nothing to count (EarlyAnswer stays false).
		req.Body = io.NopCloser(bytes.NewReader(once.b))
	} else if req.Body != nil && req.Body != http.NoBody {
		body = &countingBody{rc: req.Body}
		req.Body = body
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, classifyTransport(err, wrote.Load(), req.Method)
	}
	early := body != nil && !body.drained(req.ContentLength)
	defer resp.Body.Close()
	answer, err := readAnswer(resp.Body, resp.ContentLength, limit)
	if err != nil {
		code := CodeConnectionLostWhileWaiting
		if isTimeout(err) {
			code = CodeTimeoutAfterRequestSent
		}
		return nil, NewError(code, ReconcileBeforeRetry, fmt.Errorf("%s: read answer (HTTP %d): %w", req.Method, resp.StatusCode, safeErr(err)))
	}
	if int64(len(answer)) > limit {
		return nil, NewError(CodeUnexpectedResponse, ReconcileBeforeRetry, fmt.Errorf("%s: answer (HTTP %d) over %d bytes", req.Method, resp.StatusCode, limit))
	}
	return &HTTPResponse{StatusCode: resp.StatusCode, Header: resp.Header, Body: answer, EarlyAnswer: early}, nil
}

// readAnswer reads at most limit+1 bytes of an answer into one buffer of
// the announced size (size < 0: unknown), growing it only past that, where
// io.ReadAll would start at 512 bytes and copy as it grows.
func readAnswer(r io.Reader, size, limit int64) ([]byte, error) {
	n := int64(512)
	if size >= 0 {
		n = min(size, limit) + 1 // +1: room to see EOF (or an over-long body) without growing
	}
	b := make([]byte, 0, n)
	r = io.LimitReader(r, limit+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		k, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func classifyTransport(err error, wrote bool, method string) *Error {
	cause := safeErr(err)
	if !wrote {
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return NewError(CodeConnectionRefused, Retry, fmt.Errorf("%s: %w", method, cause))
		case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return NewError(CodeConnectionResetBeforeResponse, Retry, fmt.Errorf("%s: closed before the request was written: %w", method, cause))
		default:
			return NewError(CodeRequestNotSent, Retry, fmt.Errorf("%s: %w", method, cause))
		}
	}
	if isTimeout(err) {
		return NewError(CodeTimeoutAfterRequestSent, ReconcileBeforeRetry, fmt.Errorf("%s: no answer in time after the request was sent: %w", method, cause))
	}
	return NewError(CodeConnectionLostWhileWaiting, ReconcileBeforeRetry, fmt.Errorf("%s: connection lost after the request was sent: %w", method, cause))
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// safeErr drops the *url.Error wrapper, whose text quotes the URL.
func safeErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// StatusError returns the default classification of a non-2xx answer (nil
// for 2xx): the code StatusCode gives, the class DefaultClass gives it, and
// Retry-After carried on 429 and 503. Adapters refine it with the target's
// error body first.
func StatusError(resp *HTTPResponse, now time.Time) *Error {
	s := resp.StatusCode
	if s >= 200 && s < 300 {
		return nil
	}
	code := StatusCode(s, resp.EarlyAnswer)
	err := fmt.Errorf("HTTP %d", s)
	if resp.EarlyAnswer && s >= 500 && s < 600 && s != http.StatusServiceUnavailable {
		err = fmt.Errorf("HTTP %d before the request was written", s)
	}
	e := NewError(code, DefaultClass(code), err)
	if s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable {
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			e.RetryAfter = d
		}
	}
	return e
}

// MaxRetryAfter caps a parsed Retry-After.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter parses a Retry-After value: delay-seconds or an HTTP date
// (relative to now; a past date is zero). ok is false when v is empty or
// malformed. The result is capped at MaxRetryAfter.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > MaxRetryAfter:
		return MaxRetryAfter, true
	}
	return d, true
}

// Unexpected returns an unexpected_response *Error with a safe description
// (never the body).
func Unexpected(class Class, format string, args ...any) *Error {
	return NewError(CodeUnexpectedResponse, class, fmt.Errorf(format, args...))
}

// DecodeJSON decodes body into v. A failure is an unexpected_response
// *Error of the given class whose text names what was decoded and where the
// JSON broke, never the body's content.
func DecodeJSON(body []byte, v any, class Class, what string) error {
	if err := json.Unmarshal(body, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return Unexpected(class, "decode %s: invalid JSON at offset %d", what, se.Offset)
		case errors.As(err, &te):
			return Unexpected(class, "decode %s: field %q has JSON type %s", what, te.Field, te.Value)
		default:
			return Unexpected(class, "decode %s: not the expected JSON (%d bytes)", what, len(body))
		}
	}
	return nil
}

// TargetKey returns key when it fits maxLen bytes (maxLen <= 0: no limit),
// else a stable digest form: as much of the key's prefix as fits, "~", and
// the hex SHA-256 of the whole key; when maxLen is too short for that, the
// digest truncated to maxLen. Equal keys always map to equal target keys.
func TargetKey(key string, maxLen int) string {
	if maxLen <= 0 || len(key) <= maxLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	d := hex.EncodeToString(sum[:])
	if maxLen < len(d)+1+8 {
		return d[:min(maxLen, len(d))]
	}
	return key[:maxLen-len(d)-1] + "~" + d
}
