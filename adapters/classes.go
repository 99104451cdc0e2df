package adapters

import (
	"maps"
	"net/http"
)

// defaultClasses is the one table of what may follow a shared safe code
// when no configured rule says otherwise. The HTTP status answers
// (StatusError) take their class from it, and the worker's
// default rules are built from it, so the adapter and the worker give one
// answer for each code.
//
// Only an answer that proves the request was not processed is retried
// blindly: nothing was written (connection refused or reset before the
// request, a 5xx before the whole request was written), 429, or 503 — the
// target's own "not processed". An answer that may come after the target
// committed — a gateway's 502 or 504 (its upstream may have committed before
// the gateway gave up), a 500 after the request was written, a timeout or a
// connection lost while waiting, an answer that is not what was expected —
// is looked up by key first: a key dropped on the way would otherwise turn a
// re-send into a second effect.
var defaultClasses = map[string]Class{
	CodeConnectionResetBeforeResponse: Retry,
	CodeConnectionRefused:             Retry,
	CodeHTTP429:                       Retry,
	CodeHTTP503:                       Retry,
	CodeHTTP500BeforeWritten:          Retry,
	CodeHTTP502BeforeWritten:          Retry,
	CodeHTTP504BeforeWritten:          Retry,
	CodeHTTP5xxBeforeWritten:          Retry,

	CodeTimeoutAfterRequestSent:    ReconcileBeforeRetry,
	CodeConnectionLostWhileWaiting: ReconcileBeforeRetry,
	CodeHTTP500:                    ReconcileBeforeRetry,
	CodeHTTP502:                    ReconcileBeforeRetry,
	CodeHTTP504:                    ReconcileBeforeRetry,
	CodeUnexpectedResponse:         ReconcileBeforeRetry,

	CodeValidation:          NeverRetry,
	CodeAuthorizationDenied: NeverRetry,
	CodeKeyPayloadMismatch:  NeverRetry,
	CodeNotFound:            NeverRetry,
	CodeInsufficientFunds:   NeverRetry,
	CodeDeclined:            NeverRetry,
}

// DefaultClasses returns a copy of the default class of every shared safe
// code (see defaultClasses).
func DefaultClasses() map[string]Class { return maps.Clone(defaultClasses) }

// DefaultClass is the default class of a shared safe code; a code the table
// does not list is reconcile_before_retry, the only safe guess.
func DefaultClass(code string) Class {
	if c, ok := defaultClasses[code]; ok {
		return c
	}
	return ReconcileBeforeRetry
}

// StatusCode is the safe code of a non-2xx HTTP answer; early says the
// answer came before the whole request was written.
//
//	429                 → http_429
//	500, 502, 503, 504  → http_500, http_502, http_503, http_504
//	other 5xx           → unexpected_response
//	5xx but 503, early  → http_500_before_request_written (http_502_…,
//	                      http_504_…, http_5xx_…)
//	400, 422            → validation_error
//	401, 403            → authorization_denied
//	409                 → idempotency_key_payload_mismatch
//	404                 → not_found
//	other 4xx, 1xx, 3xx → unexpected_response
//
// Its class is DefaultClass(code).
func StatusCode(status int, early bool) string {
	if early && status >= 500 && status < 600 && status != http.StatusServiceUnavailable {
		switch status {
		case http.StatusInternalServerError:
			return CodeHTTP500BeforeWritten
		case http.StatusBadGateway:
			return CodeHTTP502BeforeWritten
		case http.StatusGatewayTimeout:
			return CodeHTTP504BeforeWritten
		}
		return CodeHTTP5xxBeforeWritten
	}
	switch status {
	case http.StatusTooManyRequests:
		return CodeHTTP429
	case http.StatusInternalServerError:
		return CodeHTTP500
	case http.StatusBadGateway:
		return CodeHTTP502
	case http.StatusServiceUnavailable:
		return CodeHTTP503
	case http.StatusGatewayTimeout:
		return CodeHTTP504
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return CodeValidation
	case http.StatusUnauthorized, http.StatusForbidden:
		return CodeAuthorizationDenied
	case http.StatusConflict:
		return CodeKeyPayloadMismatch
	case http.StatusNotFound:
		return CodeNotFound
	}
	return CodeUnexpectedResponse
}
