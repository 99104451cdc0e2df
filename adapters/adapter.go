package adapters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemgate/idemgate/operation"
)

// Adapter performs operations on one target system and looks earlier attempts
// up by the operation key. Implementations pass the key to the target (the
// provider's idempotency header, or an external-ID field whose uniqueness the
// target or the adapter enforces) so that the target itself recognises a repeat.
type Adapter interface {
	// Name is the adapter instance name used in configuration, e.g. "yookassa".
	Name() string
	// TargetSystem is the class of target: "1c", "crm" or "payments".
	TargetSystem() string
	// Capabilities declares what the target guarantees for our key.
	Capabilities() Capabilities
	// Execute performs the operation once. Every failure is an *Error.
	Execute(ctx context.Context, op operation.Operation) (Outcome, error)
	// Lookup finds an earlier attempt by the operation key. A failure to ask is
	// an *Error; "not found" and "cannot tell" are results, not errors.
	// Lookup must work from the key alone: the reconciler may call it with an
	// Operation whose Fields are nil (the command is no longer at hand). It
	// then matches on the key only and never reports a payload mismatch; an
	// operation that cannot be found without its fields is Indeterminate.
	Lookup(ctx context.Context, op operation.Operation) (LookupResult, error)
}

// Supporter is an Adapter that performs some operation types only, or some
// only as configured (1C's invoice.cancel needs its HTTP service): Supports
// returns nil, or why the adapter cannot perform opType. The daemon checks
// every routed type at start and refuses a route it cannot serve.
type Supporter interface {
	Supports(opType string) error
}

// Admitter is an Adapter whose target account may have a client-side rate
// limit (RateLimit). Admit reserves, in the account's bucket, the first
// requests a call of op makes (Client.Admit); nil when no limit applies.
// The worker waits for the admission before it takes an attempt, then makes
// the call under Admission.Bind.
type Admitter interface {
	Admit(op operation.Operation) *Admission
}

// Capabilities is an adapter's profile.
type Capabilities struct {
	// NativeKey: the target deduplicates by our key itself (idempotency header
	// or a unique external ID).
	NativeKey bool
	// Lookup: the target can be searched by our key.
	Lookup bool
	// SingleFlight: the target does not enforce uniqueness, so creation is
	// serialised per key and preceded by a search.
	SingleFlight bool
	// MappingTable: the key is kept in a field or table of ours because the
	// target has no external ID.
	MappingTable bool
	// SettleTime is how long after an attempt a "not found" lookup must wait
	// before it counts (search index lag).
	SettleTime time.Duration
	// MaxKeyLen is the longest key the target accepts; longer operation keys are
	// mapped to a stable digest by the adapter.
	MaxKeyLen int
}

// Outcome is the normalised result of a successful operation: nothing secret,
// never the target's full response.
type Outcome struct {
	// ObjectID is the target's ID of the created object (invoice, task, payment).
	ObjectID string
	// BusinessStatus is the target's business status, e.g. "succeeded", "posted".
	BusinessStatus string
	// RequestID is the target's request id, for tracing, when it gives one.
	RequestID string
	// Details are further safe, normalised fields for the result envelope.
	Details map[string]any
	// Duplicates are the ids of further objects the target holds for the
	// same key (a target without uniqueness raced, or a connector dropped
	// the key and a retry created again). ObjectID is the one the operation
	// keeps (the oldest); these need an operator. Set with
	// ReportDuplicates, which also puts them in Details.
	Duplicates []string
}

// MaxReportedDuplicates caps the duplicate ids carried in Details.
const MaxReportedDuplicates = 20

// ReportDuplicates records ids (the objects other than ObjectID that hold
// the key) in Duplicates and in Details as "duplicates" (their number) and
// "duplicate_object_ids" (at most MaxReportedDuplicates), so the stored and
// published result shows them. No ids: nothing changes.
func (o *Outcome) ReportDuplicates(ids []string) {
	if len(ids) == 0 {
		return
	}
	o.Duplicates = append([]string(nil), ids...)
	if o.Details == nil {
		o.Details = map[string]any{}
	}
	o.Details["duplicates"] = len(ids)
	o.Details["duplicate_object_ids"] = append([]string(nil), ids[:min(len(ids), MaxReportedDuplicates)]...)
}

// Attempt is what the worker tells an adapter about the call it makes: the
// attempt number and when the journal first saw the key. Adapters use it to
// narrow searches (no request for the key can predate Since) and to skip a
// search that cannot find anything (the first attempt of a key).
type Attempt struct {
	// Number is the attempt number: 1 for the first call for the key.
	Number int
	// Since is when the journal first recorded the key, by the journal's
	// clock; zero when unknown.
	Since time.Time
	// Fresh: every earlier attempt for the key was held back by a rate
	// limit before it ran (Throttled: never sent, or refused by the
	// target's limit), so none can have made an object: the call is a
	// first attempt for the adapter whatever its Number.
	Fresh bool
	// Until is, on the same clock, when every call made so far for the key
	// had ended at the latest (the journal's attempts trail); zero when
	// unknown or while one may still run. A lookup finds an object an
	// attempt made between Since and Until, except for a target that
	// commits a request after its client gave up: such an object can be
	// newer, so a search that ends at Until must read on to now before it
	// may answer "not found".
	Until time.Time
}

type attemptKey struct{}

// WithAttempt returns ctx carrying a.
func WithAttempt(ctx context.Context, a Attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

// AttemptFrom returns the Attempt ctx carries; ok is false when none does
// (a direct call: adapters then assume an earlier attempt may exist and
// search without a lower time bound beyond their lookup window).
func AttemptFrom(ctx context.Context) (a Attempt, ok bool) {
	a, ok = ctx.Value(attemptKey{}).(Attempt)
	return a, ok
}

// Retried reports whether ctx's call may follow an earlier one for the
// same key that could have reached the target: true unless the worker said
// this is the key's first attempt, or that every earlier one was held back
// by a rate limit before it ran (Attempt.Fresh).
func Retried(ctx context.Context) bool {
	a, ok := AttemptFrom(ctx)
	return !ok || (a.Number != 1 && !a.Fresh)
}

// LookupStatus is what a lookup by key found.
type LookupStatus string

// Lookup statuses.
const (
	Found         LookupStatus = "found"
	NotFound      LookupStatus = "not_found"
	Indeterminate LookupStatus = "indeterminate"
)

// LookupResult is the answer of Lookup. Outcome is set when Status is Found.
type LookupResult struct {
	Status  LookupStatus
	Outcome Outcome
	// Final is set when the target reports the earlier attempt as a final
	// failure (e.g. a declined payment): Outcome then describes it and Code
	// carries the safe error code.
	Final bool
	Code  string
}

// Class says what may be done after an error.
type Class string

// Error classes, as docs/concepts.md defines them.
const (
	// Retry: the request failed before it could have had an effect (not sent,
	// 429, 503): it may be sent again with the same key.
	Retry Class = "retry"
	// ReconcileBeforeRetry: the request may have had an effect (timeout after
	// sending, connection lost while waiting): look it up before anything else.
	ReconcileBeforeRetry Class = "reconcile_before_retry"
	// NeverRetry: a final business answer (validation, access denied,
	// insufficient funds, key/payload mismatch).
	NeverRetry Class = "never_retry"
)

// Valid reports whether c is one of the three classes.
func (c Class) Valid() bool {
	return c == Retry || c == ReconcileBeforeRetry || c == NeverRetry
}

// Safe error codes shared by adapters. Adapters may add their own; the
// configured rules map codes to classes.
const (
	CodeConnectionResetBeforeResponse = "connection_reset_before_response"
	CodeConnectionRefused             = "connection_refused"
	CodeHTTP429                       = "http_429"
	CodeHTTP500                       = "http_500"
	CodeHTTP502                       = "http_502"
	CodeHTTP503                       = "http_503"
	CodeHTTP504                       = "http_504"
	CodeTimeoutAfterRequestSent       = "timeout_after_request_sent"
	CodeConnectionLostWhileWaiting    = "connection_lost_while_waiting_response"
	CodeValidation                    = "validation_error"
	CodeAuthorizationDenied           = "authorization_denied"
	CodeInsufficientFunds             = "insufficient_funds"
	CodeKeyPayloadMismatch            = "idempotency_key_payload_mismatch"
	CodeNotFound                      = "not_found"
	CodeUnexpectedResponse            = "unexpected_response"
	CodeDeclined                      = "declined"
)

// Error is an adapter failure: a safe code, its default class and an optional
// Retry-After. It never holds a credential, a card number or a response body.
type Error struct {
	Code       string
	Class      Class
	RetryAfter time.Duration
	// RequestID is the target's request id when it gave one.
	RequestID string
	// Err is the underlying error, for logs; it must already be safe.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s (%s): %v", e.Code, e.Class, e.Err)
	}
	return fmt.Sprintf("%s (%s)", e.Code, e.Class)
}

func (e *Error) Unwrap() error { return e.Err }

// NewError returns an *Error with the given code and class.
func NewError(code string, class Class, err error) *Error {
	return &Error{Code: code, Class: class, Err: err}
}

// NotSent returns err as the failure of a search an adapter makes before it
// creates: no create was sent, so the call may be retried (class Retry).
// Authorization stays final, and so does every code in keep (a target's
// own answer that a retry must not hurry, e.g. Bitrix24's overload_limit).
func NotSent(err error, keep ...string) error {
	e := AsError(err)
	if e.Code == CodeAuthorizationDenied || slices.Contains(keep, e.Code) {
		return e
	}
	c := *e
	c.Class = Retry
	return &c
}

// AsError extracts an *Error from err. An error that is not one is treated as
// an unexplained failure after the request may have been sent: reconcile.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return &Error{Code: CodeUnexpectedResponse, Class: ReconcileBeforeRetry, Err: err}
}
