package adapters_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/internal/testkit/childproc"
	"github.com/idemgate/idemgate/redact"
)

// closeSecond serves the first request on each connection and hangs up on
// the second one after reading it: what a keep-alive race looks like.
func closeSecond(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var seen atomic.Int32
	perConn := map[string]int{}
	var mu = make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		mu <- struct{}{}
		perConn[r.RemoteAddr]++
		n := perConn[r.RemoteAddr]
		<-mu
		if n == 1 {
			w.WriteHeader(http.StatusCreated)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestTransportDoesNotResendKeyedPOST(t *testing.T) {
	t.Parallel()
	t.Run("stdlib_request_is_resent", func(t *testing.T) {
		t.Parallel()
		srv, seen := closeSecond(t)
		c := adapters.NewHTTPClient(5 * time.Second)
		for range 2 {
			req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader([]byte(`{}`)))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "k")
			resp, err := c.Do(req)
			require.NoError(t, err, "the Transport silently re-sent the keyed POST")
			_ = resp.Body.Close()
		}
		require.Equal(t, int32(3), seen.Load(), "the hazard: the server saw the second POST twice")
	})
	t.Run("NewRequest_is_not_resent", func(t *testing.T) {
		t.Parallel()
		srv, seen := closeSecond(t)
		c := adapters.NewHTTPClient(5 * time.Second)
		var last error
		for range 2 {
			req, err := adapters.NewRequest(context.Background(), http.MethodPost, srv.URL, []byte(`{}`))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "k")
			var resp *adapters.HTTPResponse
			resp, last = adapters.Send(c, req, 0)
			if last == nil {
				require.Equal(t, http.StatusCreated, resp.StatusCode)
			}
		}
		require.Equal(t, int32(2), seen.Load())
		ae := adapters.AsError(last)
		require.Equal(t, adapters.ReconcileBeforeRetry, ae.Class, "%v", last)
	})
}

func TestSendClassifiesTransportFailures(t *testing.T) {
	t.Parallel()
	// A closed port: refused before anything was written.
	refusing, release, err := childproc.RefusingAddr()
	require.NoError(t, err)
	t.Cleanup(release)
	closedURL := "http://" + refusing + "/rest/1/s3cr3t-webhook/crm.deal.add"

	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hang) })
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
	}))
	t.Cleanup(cut.Close)
	short := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{"a":`))
	}))
	t.Cleanup(short.Close)
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 2048))
	}))
	t.Cleanup(big.Close)

	cases := []struct {
		name  string
		url   string
		limit int64
		class adapters.Class
		code  string
	}{
		{"refused", closedURL, 0, adapters.Retry, adapters.CodeConnectionRefused},
		{"timeout_after_send", slow.URL, 0, adapters.ReconcileBeforeRetry, adapters.CodeTimeoutAfterRequestSent},
		{"closed_after_send", cut.URL, 0, adapters.ReconcileBeforeRetry, adapters.CodeConnectionLostWhileWaiting},
		{"body_cut", short.URL, 0, adapters.ReconcileBeforeRetry, adapters.CodeConnectionLostWhileWaiting},
		{"body_too_big", big.URL, 1024, adapters.ReconcileBeforeRetry, adapters.CodeUnexpectedResponse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := adapters.NewHTTPClient(300 * time.Millisecond)
			req, err := adapters.NewRequest(context.Background(), http.MethodPost, tc.url, []byte(`{"x":1}`))
			require.NoError(t, err)
			_, err = adapters.Send(c, req, tc.limit)
			ae := adapters.AsError(err)
			require.Equal(t, tc.class, ae.Class, "%v", err)
			require.Equal(t, tc.code, ae.Code, "%v", err)
			require.NotContains(t, err.Error(), "s3cr3t", "the URL may hold a credential")
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in string
		d  time.Duration
		ok bool
	}{
		{"", 0, false}, {"abc", 0, false}, {"-1", 0, false}, {"0", 0, true}, {" 12 ", 12 * time.Second, true},
		{"99999999999", adapters.MaxRetryAfter, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), adapters.MaxRetryAfter, true},
	} {
		d, ok := adapters.ParseRetryAfter(tc.in, now)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.d, d, tc.in)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "Wed, 21 Oct 2015 07:28:00 GMT", "", "-5", "1e9"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, _ := adapters.ParseRetryAfter(s, now)
		if d < 0 || d > adapters.MaxRetryAfter {
			t.Fatalf("out of range %v", d)
		}
	})
}

func TestDecodeJSONIsSafe(t *testing.T) {
	t.Parallel()
	var v struct{ ID int }
	err := adapters.DecodeJSON([]byte(`{"ID":"secret-value"}`), &v, adapters.ReconcileBeforeRetry, "invoice")
	ae := adapters.AsError(err)
	require.Equal(t, adapters.CodeUnexpectedResponse, ae.Code)
	require.NotContains(t, err.Error(), "secret-value")
	err = adapters.DecodeJSON([]byte(`{"ID":`), &v, adapters.NeverRetry, "invoice")
	require.Equal(t, adapters.NeverRetry, adapters.AsError(err).Class)
}

func TestTargetKey(t *testing.T) {
	t.Parallel()
	k := "prod:invoice.create:order-48291:v1"
	require.Equal(t, k, adapters.TargetKey(k, 100))
	require.Equal(t, k, adapters.TargetKey(k, 0))
	long := "prod:invoice.create:" + string(bytes.Repeat([]byte("a"), 200)) + ":v1"
	got := adapters.TargetKey(long, 100)
	require.Len(t, got, 100)
	require.Equal(t, got, adapters.TargetKey(long, 100), "stable")
	require.NotEqual(t, got, adapters.TargetKey(long+"x", 100))
	require.Len(t, adapters.TargetKey(long, 32), 32)
}

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	s := redact.Secret("hunter2")
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %s %q %#v %+v", s, s, s, s, struct{ S redact.Secret }{s})} {
		require.NotContains(t, out, "hunter2")
	}
	require.Equal(t, "hunter2", s.Reveal())
}

func TestCredentialLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "cred")
	require.NoError(t, os.WriteFile(file, []byte("  from-file \nsecond"), 0o600))
	env := func(k string) string {
		if k == "X_TOKEN" {
			return "from-env"
		}
		return ""
	}
	s, err := adapters.Credential{Value: "direct", File: file, Env: "X_TOKEN"}.Load(env)
	require.NoError(t, err)
	require.Equal(t, "direct", s.Reveal())
	s, err = adapters.Credential{File: file, Env: "X_TOKEN"}.Load(env)
	require.NoError(t, err)
	require.Equal(t, "from-file", s.Reveal())
	s, err = adapters.Credential{Env: "X_TOKEN"}.Load(env)
	require.NoError(t, err)
	require.Equal(t, "from-env", s.Reveal())
	_, err = adapters.Credential{Env: "Y"}.Load(env)
	require.ErrorIs(t, err, adapters.ErrNoCredential)
	_, err = adapters.Credential{}.Load(env)
	require.ErrorIs(t, err, adapters.ErrNoCredential)
	_, err = adapters.Credential{File: filepath.Join(dir, "missing")}.Load(env)
	require.True(t, errors.Is(err, os.ErrNotExist))
}

// A server that answers before reading the request (a proxy refusing it, a
// 500 thrown before the handler reads) cannot have acted on it: Send marks
// the answer early and StatusError gives the before-written codes (retry).
// The same status after the whole request was written keeps the codes that
// may follow a commit (reconcile).
func TestFiveHundredBeforeAndAfterTheRequestWasWritten(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusInternalServerError
		if s := r.URL.Query().Get("status"); s != "" {
			_, _ = fmt.Sscan(s, &status)
		}
		if r.URL.Query().Get("read") == "1" {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		w.Header().Set("Connection", "close")
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	c := adapters.NewHTTPClient(5 * time.Second)

	for _, tc := range []struct {
		status     int
		early      string
		afterCode  string
		afterClass adapters.Class
	}{
		{500, adapters.CodeHTTP500BeforeWritten, adapters.CodeHTTP500, adapters.ReconcileBeforeRetry},
		{502, adapters.CodeHTTP502BeforeWritten, adapters.CodeHTTP502, adapters.ReconcileBeforeRetry},
		{504, adapters.CodeHTTP504BeforeWritten, adapters.CodeHTTP504, adapters.ReconcileBeforeRetry},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			// Before: the body's bytes are held back until the answer is in.
			pr, pw := io.Pipe()
			req, err := adapters.NewRequest(context.Background(), http.MethodPost, fmt.Sprintf("%s/?status=%d", srv.URL, tc.status), nil)
			require.NoError(t, err)
			req.Body, req.ContentLength = pr, 10
			resp, err := adapters.Send(c, req, 0)
			_ = pw.Close()
			require.NoError(t, err)
			require.True(t, resp.EarlyAnswer, "answered before the body was written")
			e := adapters.StatusError(resp, time.Now())
			require.Equal(t, tc.early, e.Code)
			require.Equal(t, adapters.Retry, e.Class)

			// After: the whole body was written (and read by the server).
			req, err = adapters.NewRequest(context.Background(), http.MethodPost, fmt.Sprintf("%s/?status=%d&read=1", srv.URL, tc.status), []byte(`{"k":"v"}`))
			require.NoError(t, err)
			resp, err = adapters.Send(c, req, 0)
			require.NoError(t, err)
			require.False(t, resp.EarlyAnswer)
			e = adapters.StatusError(resp, time.Now())
			require.Equal(t, tc.afterCode, e.Code)
			require.Equal(t, tc.afterClass, e.Class)
		})
	}
}

// The client-side bucket makes requests wait for their slot instead of
// reaching the target over its limit, and refuses (retry, nothing sent) a
// wait that would outlast the call.
func TestClientRateLimit(t *testing.T) {
	t.Parallel()
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	lim := adapters.RateLimit{Rate: 1, Burst: 2}.WithDefaults(adapters.RateLimit{})
	require.NoError(t, lim.Validate())
	c := adapters.NewClient(5*time.Second, lim)
	send := func(ctx context.Context) error {
		req, err := adapters.NewRequest(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		_, err = c.Send(req, 0)
		return err
	}
	require.NoError(t, send(context.Background()))
	require.NoError(t, send(context.Background()))
	// The burst is spent; the next slot is about a second away.
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := send(short)
	ae := adapters.AsError(err)
	require.Equal(t, adapters.CodeClientRateLimit, ae.Code)
	require.Equal(t, adapters.Retry, ae.Class)
	require.Positive(t, ae.RetryAfter)
	require.Equal(t, int32(2), seen.Load(), "the refused request was not sent")
	// A call with room waits for its slot.
	require.NoError(t, send(context.Background()))
	require.Equal(t, int32(3), seen.Load())

	require.Error(t, adapters.RateLimit{Rate: 1, Burst: -1}.Validate())
	require.Equal(t, adapters.RateLimit{Rate: 2, Burst: 40}, adapters.RateLimit{}.WithDefaults(adapters.RateLimit{Rate: 2, Burst: 40}))
	require.False(t, adapters.RateLimit{Rate: -1}.WithDefaults(adapters.RateLimit{Rate: 2, Burst: 40}).On())
}

func TestOutcomeReportDuplicates(t *testing.T) {
	t.Parallel()
	var o adapters.Outcome
	o.ReportDuplicates(nil)
	require.Nil(t, o.Details)
	o.ReportDuplicates([]string{"b", "c"})
	require.Equal(t, []string{"b", "c"}, o.Duplicates)
	require.Equal(t, 2, o.Details["duplicates"])
	require.Equal(t, []string{"b", "c"}, o.Details["duplicate_object_ids"])
}

// Calls take their place in the client-side bucket in the order they ask
// (Admit): each place comes one call's worth of slots after the one before,
// the requests a call makes under its place go without taking further slots
// (even with no time left to wait for one), a request past the reserved
// ones waits for the bucket as any other, and a place nobody used is given
// back to the calls behind it.
func TestAdmissionsAreServedInOrder(t *testing.T) {
	t.Parallel()
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	require.Nil(t, adapters.NewClient(time.Second, adapters.RateLimit{Rate: -1}).Admit(3), "no limit, no place to wait for")
	c := adapters.NewClient(5*time.Second, adapters.RateLimit{Rate: 10, Burst: 3})
	send := func(ctx context.Context) error {
		req, err := adapters.NewRequest(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		_, err = c.Send(req, 0)
		return err
	}
	first, second, third := c.Admit(3), c.Admit(3), c.Admit(3)
	require.Zero(t, first.Delay(), "the burst is free")
	require.Greater(t, second.Delay(), first.Delay())
	require.Greater(t, third.Delay(), second.Delay(), "first come, first served")
	require.LessOrEqual(t, third.Delay(), 600*time.Millisecond, "three slots at 10/s each")

	// The first call's three requests go at once, under a deadline no
	// wait for the (now spent) bucket would fit in.
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	under := first.Bind(short)
	for range 3 {
		require.NoError(t, send(under))
	}
	require.Equal(t, int32(3), seen.Load())
	ae := adapters.AsError(send(under))
	require.Equal(t, adapters.CodeClientRateLimit, ae.Code, "a fourth request waits for the bucket like any other")
	require.Equal(t, int32(3), seen.Load(), "and was not sent")
	first.Cancel() // used: keeps what it reserved

	// The third call gives its place up: the next call takes it.
	was := third.Delay()
	third.Cancel()
	fourth := c.Admit(3)
	require.LessOrEqual(t, fourth.Delay(), was, "the place given back")
	require.Greater(t, fourth.Delay(), second.Delay(), "behind the calls still waiting")
	ae = adapters.AsError(send(third.Bind(short)))
	require.Equal(t, adapters.CodeClientRateLimit, ae.Code, "a cancelled place carries no slots")
}

// A request the target refused for its own rate limit costs the client's
// bucket one slot more: clients sharing the target's limit slow down while
// it is full.
func TestRefusalSlowsTheBucket(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	send := func(c *adapters.Client) {
		req, err := adapters.NewRequest(context.Background(), http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		_, err = c.Send(req, 0)
		require.NoError(t, err)
	}
	lim := adapters.RateLimit{Rate: 1, Burst: 4}
	taken, refused := adapters.NewClient(time.Second, lim), adapters.NewClient(time.Second, lim)
	send(taken)
	refuse.Store(true)
	send(refused)
	// Both sent one request; the refused one's bucket gave up a second slot.
	require.Zero(t, taken.Admit(3).Delay(), "three slots left")
	require.Positive(t, refused.Admit(3).Delay(), "two slots left")
}
