package adapters_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
)

// TestStatusClasses is the one table of what a non-2xx HTTP answer means:
// its safe code and class, before and after the whole request was written,
// and the Retry-After carried. StatusError follows it, and the worker's
// default rules are built from the same classes (worker.DefaultRules), so a
// gateway's 502 is looked up by key everywhere: it may follow a commit
// upstream.
func TestStatusClasses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const (
		retry     = adapters.Retry
		reconcile = adapters.ReconcileBeforeRetry
		never     = adapters.NeverRetry
	)
	for _, tc := range []struct {
		status     int
		early      bool
		retryAfter string
		code       string
		class      adapters.Class
		wait       time.Duration
	}{
		{200, false, "", "", "", 0},
		{204, true, "", "", "", 0},
		{429, false, "7", adapters.CodeHTTP429, retry, 7 * time.Second},
		{429, false, now.Add(90 * time.Second).Format(http.TimeFormat), adapters.CodeHTTP429, retry, 90 * time.Second},
		{503, false, "2", adapters.CodeHTTP503, retry, 2 * time.Second},
		{503, true, "2", adapters.CodeHTTP503, retry, 2 * time.Second},
		{500, false, "", adapters.CodeHTTP500, reconcile, 0},
		{502, false, "", adapters.CodeHTTP502, reconcile, 0},
		{504, false, "", adapters.CodeHTTP504, reconcile, 0},
		{599, false, "", adapters.CodeUnexpectedResponse, reconcile, 0},
		{500, true, "", adapters.CodeHTTP500BeforeWritten, retry, 0},
		{502, true, "", adapters.CodeHTTP502BeforeWritten, retry, 0},
		{504, true, "", adapters.CodeHTTP504BeforeWritten, retry, 0},
		{599, true, "", adapters.CodeHTTP5xxBeforeWritten, retry, 0},
		{400, false, "", adapters.CodeValidation, never, 0},
		{422, false, "", adapters.CodeValidation, never, 0},
		{401, false, "", adapters.CodeAuthorizationDenied, never, 0},
		{403, false, "", adapters.CodeAuthorizationDenied, never, 0},
		{409, false, "", adapters.CodeKeyPayloadMismatch, never, 0},
		{404, false, "", adapters.CodeNotFound, never, 0},
		{418, false, "", adapters.CodeUnexpectedResponse, reconcile, 0},
		{429, true, "", adapters.CodeHTTP429, retry, 0},
		{302, false, "", adapters.CodeUnexpectedResponse, reconcile, 0},
		{101, false, "", adapters.CodeUnexpectedResponse, reconcile, 0},
	} {
		t.Run(fmt.Sprintf("%d/early=%v", tc.status, tc.early), func(t *testing.T) {
			h := http.Header{}
			if tc.retryAfter != "" {
				h.Set("Retry-After", tc.retryAfter)
			}
			e := adapters.StatusError(&adapters.HTTPResponse{StatusCode: tc.status, Header: h, EarlyAnswer: tc.early}, now)
			if tc.class == "" {
				require.Nil(t, e)
				return
			}
			require.Equal(t, tc.code, e.Code)
			require.Equal(t, tc.class, e.Class)
			require.Equal(t, tc.wait, e.RetryAfter)
			require.Equal(t, tc.code, adapters.StatusCode(tc.status, tc.early))
			require.Equal(t, tc.class, adapters.DefaultClass(tc.code))
		})
	}
	// Every code the status table gives is in the class table: none falls
	// back to the safe guess by omission.
	classes := adapters.DefaultClasses()
	for s := 100; s < 600; s++ {
		for _, early := range []bool{false, true} {
			if s >= 200 && s < 300 {
				continue
			}
			_, ok := classes[adapters.StatusCode(s, early)]
			require.True(t, ok, "HTTP %d (early %v): code %q has a default class", s, early, adapters.StatusCode(s, early))
		}
	}
	require.Equal(t, reconcile, adapters.DefaultClass("no_such_code"), "an unknown code is reconciled")
}
