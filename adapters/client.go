package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/idemgate/idemgate/redact"
)

// CodeClientRateLimit: the request was not sent because the target
// account's client-side rate limit had no room for it before the call's
// context ends. Class retry (nothing was sent); RetryAfter is the wait the
// limit asked for.
const CodeClientRateLimit = "client_rate_limited"

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
// client_rate_limited, nothing sent.
func (c *Client) Send(req *http.Request, limit int64) (*HTTPResponse, error) {
	if c.authorize != nil {
		c.authorize(req)
	}
	if err := c.wait(req.Context()); err != nil {
		return nil, err
	}
	return Send(c.http, req, limit)
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
		e := NewError(CodeClientRateLimit, Retry, fmt.Errorf("rate limit: the next slot is %v away, past the call's deadline", d.Round(time.Millisecond)))
		e.RetryAfter = d
		return e
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		e := NewError(CodeClientRateLimit, Retry, fmt.Errorf("rate limit: the call ended while waiting %v for a slot: %w", d.Round(time.Millisecond), context.Cause(ctx)))
		e.RetryAfter = d
		return e
	}
}
