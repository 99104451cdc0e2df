package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/redact"
)

// CodeClientRateLimit: the request was not sent because the target
// account's client-side rate limit had no room for it before the call's
// context ends. Class retry (nothing was sent); RetryAfter is the wait the
// limit asked for.
const CodeClientRateLimit = "client_rate_limited"

// CodeTargetRateLimit: the target refused the request for its own rate
// limit before running it (Bitrix24's 503 QUERY_LIMIT_EXCEEDED). Class
// retry: nothing was executed.
const CodeTargetRateLimit = "target_rate_limited"

// Throttled reports whether code says a rate limit held the request back
// before it ran: the account's client-side bucket (client_rate_limited,
// nothing sent) or the target's own (http_429, target_rate_limited). Such
// an answer is a wait, not a failure: the worker spends no retry budget on
// it, and an attempt that ended so made no effect.
func Throttled(code string) bool {
	return code == CodeClientRateLimit || code == CodeTargetRateLimit || code == CodeHTTP429
}

// RateLimit is a client-side token bucket for one target account: at most
// Rate requests per second on average, Burst at once. Each adapter holds
// one per configured account and every request to the target takes a token
// first, waiting (bounded by the call's context) instead of spending an
// attempt on the target's 429/503. Two adapter instances on one account
// hold two buckets: give each its share of the account's limit.
type RateLimit struct {
	// Rate is requests per second. 0 takes the adapter's default (its
	// target's published limit, or none where none is published); a
	// negative rate turns the limit off.
	Rate float64 `mapstructure:"rate"`
	// Burst is how many requests may go at once (at least 1 with a rate;
	// 0 takes the adapter's default burst).
	Burst int `mapstructure:"burst"`
}

// WithDefaults returns l with a zero Rate or Burst taken from def.
func (l RateLimit) WithDefaults(def RateLimit) RateLimit {
	if l.Rate == 0 {
		l.Rate = def.Rate
	}
	if l.Burst == 0 {
		l.Burst = def.Burst
	}
	if l.Rate > 0 && l.Burst == 0 {
		l.Burst = 1
	}
	return l
}

// Validate checks a limit after WithDefaults.
func (l RateLimit) Validate() error {
	if l.Rate > 0 && l.Burst < 1 {
		return errors.New("rate_limit.burst must be at least 1")
	}
	if l.Burst < 0 {
		return errors.New("rate_limit.burst must not be negative")
	}
	return nil
}

// On reports whether the limit applies.
func (l RateLimit) On() bool { return l.Rate > 0 }

// Client sends one adapter's requests to one target account: the HTTP
// client of NewHTTPClient, the account's RateLimit and its authorization
// (see HTTPConfig.NewClient).
type Client struct {
	http      *http.Client
	limiter   *rate.Limiter // nil: no limit
	now       func() time.Time
	authorize func(*http.Request) // nil: the target takes credentials otherwise
}

// NewClient returns a Client with the given overall HTTP timeout and rate
// limit (after WithDefaults; an off limit means none).
func NewClient(timeout time.Duration, limit RateLimit) *Client {
	return newClient(NewHTTPClient(timeout), limit)
}

func newClient(hc *http.Client, limit RateLimit) *Client {
	c := &Client{http: hc, now: time.Now}
	if limit.On() {
		c.limiter = rate.NewLimiter(rate.Limit(limit.Rate), max(limit.Burst, 1))
	}
	return c
}

// HTTP returns the underlying *http.Client.
func (c *Client) HTTP() *http.Client { return c.http }

// Send adds the account's authorization, waits for a token of the rate
// limit, then performs req once (see the package function Send). A wait that
// would outlast req's context is not started: the answer is retry
// client_rate_limited, nothing sent. A 429 answer slows the bucket down
// (Refused).
func (c *Client) Send(req *http.Request, limit int64) (*HTTPResponse, error) {
	if c.authorize != nil {
		c.authorize(req)
	}
	if err := c.wait(req.Context()); err != nil {
		return nil, err
	}
	resp, err := Send(c.http, req, limit)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		c.Refused()
	}
	return resp, err
}

// JSON is the exchange most targets speak: one request built by NewRequest
// whose body is v encoded as JSON (nil: no body), Content-Type and Accept
// application/json, the fields of header on top (an Idempotency-Key, another
// Accept), sent once by Send with the default response limit. A v that does
// not encode is a never_retry validation error, and nothing is sent.
func (c *Client) JSON(ctx context.Context, method, url string, v any, header http.Header) (*HTTPResponse, error) {
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			return nil, NewError(CodeValidation, NeverRetry, fmt.Errorf("encode the %s request body: %w", method, err))
		}
	}
	req, err := NewRequest(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return c.Send(req, 0)
}

// BasicAuth authorizes each request with HTTP Basic user and password.
func BasicAuth(user string, password redact.Secret) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, password.Reveal()) }
}

// BasicUserOK reports whether user can travel as BasicAuth's user: without
// ':' (which separates the user from the password) and without a line
// break.
func BasicUserOK(user string) bool { return !strings.ContainsAny(user, ":\r\n") }

// BearerAuth authorizes each request with a Bearer token.
func BearerAuth(token redact.Secret) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token.Reveal()) }
}

func (c *Client) wait(ctx context.Context) error {
	if c.limiter == nil {
		return nil
	}
	if a, ok := ctx.Value(admissionKey{}).(*Admission); ok && a.c == c && a.take() {
		return a.waitFor(ctx)
	}
	now := c.now()
	r := c.limiter.ReserveN(now, 1)
	if !r.OK() {
		return NewError(CodeClientRateLimit, Retry, errors.New("rate limit: burst below one request"))
	}
	d := r.DelayFrom(now)
	if d == 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && now.Add(d).After(dl) {
		r.CancelAt(now)
		return RateLimited(d, fmt.Errorf("rate limit: the next slot is %v away, past the call's deadline", d.Round(time.Millisecond)))
	}
	if err := waitSlot(ctx, d, "a slot"); err != nil {
		r.Cancel()
		return err
	}
	return nil
}

// RateLimited is the client_rate_limited error (class retry) of a call
// whose place in the client-side rate limit is d away: nothing was sent.
func RateLimited(d time.Duration, err error) *Error {
	e := NewError(CodeClientRateLimit, Retry, err)
	e.RetryAfter = d
	return e
}

// waitSlot waits d, within ctx, for a call's place (what names it); a wait
// ctx cuts short is RateLimited.
func waitSlot(ctx context.Context, d time.Duration, what string) error {
	if ctxsleep.For(ctx, d) {
		return nil
	}
	return RateLimited(d, fmt.Errorf("rate limit: the call ended while waiting %v for %s: %w", d.Round(time.Millisecond), what, context.Cause(ctx)))
}

// Refused records that the target refused a request for its own rate limit
// (a 429, which Send records itself, or a target's own signal such as
// Bitrix24's 503 QUERY_LIMIT_EXCEEDED): the bucket gives up one slot more,
// so that clients that share the target's limit without knowing of each
// other (two replicas, each with its own bucket) slow down while the
// target's limit is full, and leave its capacity to requests it takes.
func (c *Client) Refused() {
	if c == nil || c.limiter == nil {
		return
	}
	c.limiter.ReserveN(c.now(), 1)
}

// Admission is a call's place in the queue of its account's client-side
// rate limit: the call's first requests, reserved together in the order
// calls asked for them (the bucket serves reservations first come, first
// served), at a time that may lie ahead (Delay). The worker waits for that
// time before it takes an attempt, so that waiting for the bucket never
// spends one; the requests the call makes under Bind's context take the
// reserved slots first, and any further request waits for the bucket as
// usual.
type Admission struct {
	c    *Client
	r    *rate.Reservation
	n    int32
	at   time.Time
	left atomic.Int32
}

type admissionKey struct{}

// Admit reserves the first n requests of one call (at least one, at most
// the burst). It returns nil when the account has no limit.
func (c *Client) Admit(n int) *Admission {
	if c == nil || c.limiter == nil {
		return nil
	}
	n = min(max(n, 1), max(c.limiter.Burst(), 1))
	now := c.now()
	r := c.limiter.ReserveN(now, n)
	if !r.OK() {
		return nil
	}
	a := &Admission{c: c, r: r, n: int32(n), at: now.Add(r.DelayFrom(now))}
	a.left.Store(int32(n))
	return a
}

// Delay is how long from now until the reserved requests may go (zero once
// their time has come).
func (a *Admission) Delay() time.Duration { return max(a.at.Sub(a.c.now()), 0) }

// Bind returns ctx carrying the admission: the client's requests under it
// take the reserved slots first (waiting, within ctx, for their time).
func (a *Admission) Bind(ctx context.Context) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

// Cancel gives back slots no request has taken, as far as the bucket still
// can (another reservation may already have been placed behind them). An
// admission a request has used keeps what it reserved.
func (a *Admission) Cancel() {
	if a.left.Swap(0) == a.n {
		a.r.CancelAt(a.c.now())
	}
}

// take claims one reserved slot.
func (a *Admission) take() bool {
	for {
		l := a.left.Load()
		if l <= 0 {
			return false
		}
		if a.left.CompareAndSwap(l, l-1) {
			return true
		}
	}
}

// waitFor waits, within ctx, for the reserved slots' time.
func (a *Admission) waitFor(ctx context.Context) error {
	d := a.Delay()
	if d == 0 {
		return nil
	}
	return waitSlot(ctx, d, "its reserved slot")
}
