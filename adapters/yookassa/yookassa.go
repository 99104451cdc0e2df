package yookassa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// Operation types this adapter performs.
const (
	OpCharge = operation.TypePaymentCharge
	OpRefund = operation.TypePaymentRefund
)

// CodeProcessing is the safe code of YooKassa's legacy 202 "processing"
// answer: the request was accepted and its result is not known yet.
const CodeProcessing = "processing"

// CodeLookupIncomplete: Lookup read LookupMaxPages pages of the window
// without finding the key, so it cannot tell.
const CodeLookupIncomplete = "lookup_incomplete"

// Adapter is the YooKassa adapter. It is safe for concurrent use.
type Adapter struct {
	cfg    Config
	client *adapters.Client
	scans  *scanLanes
}

var _ adapters.Adapter = (*Adapter)(nil)

// New builds the adapter: defaults, credentials (value, file or
// environment), validation.
func New(cfg Config) (*Adapter, error) {
	cfg, err := adapters.Configured(cfg)
	if err != nil {
		return nil, err
	}
	shopID, err := cfg.Load(adapters.Credential{Value: redact.Secret(cfg.ShopID), Env: cfg.ShopIDEnv})
	if err != nil {
		return nil, fmt.Errorf("%w: shop_id not set (nor %s)", ErrInvalidConfig, cfg.ShopIDEnv)
	}
	secret, err := cfg.Load(adapters.Credential(cfg.SecretKey))
	if err != nil {
		return nil, fmt.Errorf("%w: secret key: %w", ErrInvalidConfig, err)
	}
	cfg.ShopID = shopID.Reveal()
	a := &Adapter{cfg: cfg, client: cfg.NewClient(adapters.BasicAuth(cfg.ShopID, secret))}
	a.scans = newScanLanes(cfg.LookupMaxPages, a.listPage, cfg.Clock, cfg.LookupSkew+cfg.LookupLate, cfg.LookupWindow)
	return a, nil
}

// Name returns the configured instance name.
func (a *Adapter) Name() string { return a.cfg.Name }

// TargetSystem is "payments".
func (a *Adapter) TargetSystem() string { return "payments" }

// Admit reserves a call's request in the client-side bucket (nil without a
// limit, the default): the worker waits for it before it takes an attempt.
func (a *Adapter) Admit(operation.Operation) *adapters.Admission { return a.client.Admit(1) }

// Capabilities: YooKassa deduplicates by Idempotence-Key for 24 hours
// (native key, replay of the first answer); Lookup scans the payment or
// refund list by created_at and matches metadata (the list cannot filter by
// metadata), which is strongly consistent, so no settle time.
func (a *Adapter) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{NativeKey: true, Lookup: true, MaxKeyLen: MaxKeyLen}
}

// Execute performs a charge (POST /v3/payments) or a refund (POST
// /v3/refunds) with the operation key as Idempotence-Key.
func (a *Adapter) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	var (
		path string
		body any
		err  error
	)
	switch op.Type {
	case OpCharge:
		path = "/v3/payments"
		body, err = a.paymentRequest(op)
	case OpRefund:
		path = "/v3/refunds"
		body, err = refundRequestFor(op)
	default:
		err = fmt.Errorf("operation type %q is not performed by the yookassa adapter", op.Type)
	}
	if err != nil {
		return adapters.Outcome{}, adapters.Invalid(err)
	}
	resp, err := a.client.JSON(ctx, http.MethodPost, a.cfg.BaseURL+path, body,
		http.Header{"Idempotence-Key": {adapters.TargetKey(op.Key.String(), MaxKeyLen)}})
	if err != nil {
		a.cfg.Logger.Debug("yookassa request failed", "operation_key", op.Key.String(), "error", err)
		return adapters.Outcome{}, err
	}
	out, err := a.createOutcome(resp, op)
	if err != nil {
		return out, err
	}
	return a.duplicatesAfterCreate(ctx, op, out), nil
}

func (a *Adapter) paymentRequest(op operation.Operation) (paymentRequest, error) {
	money, err := moneyOf(op)
	if err != nil {
		return paymentRequest{}, err
	}
	method := op.String("account_id")
	if method == "" {
		return paymentRequest{}, errors.New("account_id (the saved payment method) is required")
	}
	orderID := op.String("order_id")
	if orderID == "" {
		return paymentRequest{}, errors.New("order_id is required")
	}
	return paymentRequest{
		Amount:          money,
		Capture:         !a.cfg.TwoStage,
		PaymentMethodID: method,
		Description:     adapters.Truncate("Order "+orderID, 128),
		Metadata:        metadataFor(op, orderID),
	}, nil
}

func refundRequestFor(op operation.Operation) (refundRequest, error) {
	money, err := moneyOf(op)
	if err != nil {
		return refundRequest{}, err
	}
	pid := op.String("payment_id")
	if pid == "" {
		return refundRequest{}, errors.New("payment_id is required")
	}
	return refundRequest{PaymentID: pid, Amount: money, Metadata: metadataFor(op, op.String("order_id"))}, nil
}

func moneyOf(op operation.Operation) (amountObj, error) {
	minor := op.Int("amount_minor")
	if minor <= 0 {
		return amountObj{}, errors.New("amount_minor must be a positive integer")
	}
	cur := strings.ToUpper(op.String("currency"))
	if !validCurrency(cur) {
		return amountObj{}, errors.New("currency must be a three-letter ISO 4217 code")
	}
	return amountObj{Value: adapters.FormatMinor(minor), Currency: cur}, nil
}

// metadataFor carries the full operation key (the header may hold its
// digest), the order id and the approval id. The approval is never a key.
func metadataFor(op operation.Operation, orderID string) map[string]string {
	m := map[string]string{MetaKey: op.Key.String()}
	if orderID != "" {
		m[MetaOrderID] = adapters.Truncate(orderID, 512)
	}
	if op.ApprovalID != "" {
		m[MetaApprovalID] = adapters.Truncate(op.ApprovalID, 512)
	}
	return m
}

// createOutcome reduces the answer of a POST to an Outcome or an *Error.
func (a *Adapter) createOutcome(resp *adapters.HTTPResponse, op operation.Operation) (adapters.Outcome, error) {
	if resp.StatusCode == http.StatusAccepted {
		// Legacy "processing": accepted, result unknown; replay the same key
		// after retry_after.
		e := adapters.NewError(CodeProcessing, adapters.ReconcileBeforeRetry, errors.New("HTTP 202: request accepted, result not known yet"))
		var eb errorBody
		if json.Unmarshal(resp.Body, &eb) == nil {
			e.RetryAfter = time.Duration(eb.RetryAfterMillis()) * time.Millisecond
		}
		return adapters.Outcome{}, e
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		o, err := parseObject(resp.Body)
		if err != nil {
			return adapters.Outcome{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "%s: HTTP %d: %v", op.Type, resp.StatusCode, err)
		}
		if op.Type == OpRefund && o.PaymentID == "" {
			return adapters.Outcome{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "%s: HTTP %d: refund without payment_id", op.Type, resp.StatusCode)
		}
		out := outcomeOf(o)
		if o.Status == StatusCanceled {
			return out, declineError(o)
		}
		return out, nil
	}
	return adapters.Outcome{}, a.statusError(resp)
}

// statusError classifies a non-2xx answer, refined by YooKassa's error body.
func (a *Adapter) statusError(resp *adapters.HTTPResponse) *adapters.Error {
	e := adapters.StatusError(resp, a.cfg.Clock())
	if e == nil {
		e = adapters.Unexpected(adapters.ReconcileBeforeRetry, "HTTP %d", resp.StatusCode)
	}
	eb, ok := parseError(resp.Body)
	if !ok {
		return e
	}
	e.RequestID = adapters.SafeToken(eb.ID, 64)
	code := adapters.SafeToken(eb.Code, 40)
	switch {
	case resp.StatusCode == http.StatusBadRequest && eb.Parameter == "Idempotence-Key":
		// "Idempotence key duplicated": the key was used with another body.
		e.Code, e.Class = adapters.CodeKeyPayloadMismatch, adapters.NeverRetry
		e.Err = errors.New("HTTP 400 invalid_request on Idempotence-Key: the key was used with another request body")
		return e
	case resp.StatusCode == http.StatusBadRequest:
		e.Err = fmt.Errorf("HTTP 400 %s (parameter %q)", code, adapters.SafeToken(eb.Parameter, 64))
	default:
		e.Err = fmt.Errorf("HTTP %d %s", resp.StatusCode, code)
	}
	if e.RetryAfter == 0 && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500) {
		e.RetryAfter = time.Duration(eb.RetryAfterMillis()) * time.Millisecond
	}
	return e
}

func outcomeOf(o object) adapters.Outcome {
	minor, _ := parseMinor(o.Amount.Value)
	d := map[string]any{"amount_minor": minor, "currency": o.Amount.Currency}
	if o.PaymentID != "" {
		d["payment_id"] = adapters.SafeToken(o.PaymentID, 64)
	} else {
		d["paid"] = o.Paid
	}
	if o.CancellationDetails != nil {
		d["cancellation_party"] = adapters.SafeToken(o.CancellationDetails.Party, 40)
		d["cancellation_reason"] = adapters.SafeToken(o.CancellationDetails.Reason, 40)
	}
	return adapters.Outcome{ObjectID: o.ID, BusinessStatus: o.Status, Details: d}
}

// declineCode maps a canceled object to a safe code: insufficient funds, or
// any other decline.
func declineCode(o object) string {
	if o.CancellationDetails != nil && o.CancellationDetails.Reason == "insufficient_funds" {
		return adapters.CodeInsufficientFunds
	}
	return adapters.CodeDeclined
}

func declineError(o object) *adapters.Error {
	reason, party := "", ""
	if o.CancellationDetails != nil {
		reason, party = adapters.SafeToken(o.CancellationDetails.Reason, 40), adapters.SafeToken(o.CancellationDetails.Party, 40)
	}
	return adapters.NewError(declineCode(o), adapters.NeverRetry, fmt.Errorf("%s canceled by %s: %s", o.ID, party, reason))
}

// Lookup reads the payment list (charges) or the payment's refund list
// (refunds) for metadata idemgate_key equal to the operation key (the list
// API cannot filter by metadata), over the window of the
// key's calls (Adapter.plan), at most LookupMaxPages pages a round; a
// window not read by then is Indeterminate this round and the next goes on
// where it stopped (scan.go). Objects are counted once by id, whatever the
// paging does. Several objects with the key are duplicates: the oldest is
// the operation's, the others are reported (Outcome.Duplicates). It never
// re-POSTs (package doc).
func (a *Adapter) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	matches, complete, err := a.scan(ctx, op)
	if err != nil {
		return adapters.LookupResult{}, err
	}
	if len(matches) == 0 {
		if !complete {
			return adapters.LookupResult{Status: adapters.Indeterminate, Code: CodeLookupIncomplete}, nil
		}
		return adapters.LookupResult{Status: adapters.NotFound}, nil
	}
	o := matches[0]
	res := adapters.LookupResult{Status: adapters.Found, Outcome: outcomeOf(o)}
	if len(matches) > 1 {
		res.Code = adapters.CodeDuplicateObjects
		res.Outcome.ReportDuplicates(idsOf(matches[1:]))
	}
	if m, err := moneyOf(op); err == nil && (m.Currency != o.Amount.Currency || formatMinorOf(o) != m.Value) {
		res.Final, res.Code = true, adapters.CodeKeyPayloadMismatch
		return res, nil
	}
	if o.Status == StatusCanceled {
		res.Final, res.Code = true, declineCode(o)
	}
	return res, nil
}

// scan returns the objects carrying op's key, oldest first and each once,
// and whether its window was read as far as the plan asks (Adapter.plan
// says which created_at window, in which parts and order, and whether the
// first match ends it; scanLanes, scan.go, shares the reads between the
// lookups waiting at once and keeps a round's progress for the next).
func (a *Adapter) scan(ctx context.Context, op operation.Operation) ([]object, bool, error) {
	w := a.plan(ctx, a.cfg.Clock())
	path := "/v3/payments"
	filter := url.Values{}
	switch op.Type {
	case OpCharge:
	case OpRefund:
		// The payment narrows the scan when the command is at hand; the
		// reconciler has only the key, and the refunds list filters by
		// payment only optionally.
		path = "/v3/refunds"
		if pid := op.String("payment_id"); pid != "" {
			filter.Set("payment_id", pid)
		}
	default:
		return nil, false, adapters.Invalid(fmt.Errorf("operation type %q is not performed by the yookassa adapter", op.Type))
	}
	return a.scans.scan(ctx, path, filter, &scanRequest{key: op.Key.String(), parts: w.parts, single: w.single, closed: w.closed})
}

func idsOf(objs []object) []string {
	ids := make([]string, 0, len(objs))
	for _, o := range objs {
		ids = append(ids, adapters.SafeToken(o.ID, 64))
	}
	return ids
}

// duplicatesAfterCreate looks, after a retried attempt created an object,
// for others carrying the key (an earlier attempt that did take effect
// behind a connector that dropped Idempotence-Key). It reports them on out
// and keeps out's object as the operation's only when it is the oldest.
// A failed scan leaves out as it is: the object exists either way. Where
// the key cannot have made two payments (oneObject) nothing is read.
func (a *Adapter) duplicatesAfterCreate(ctx context.Context, op operation.Operation, out adapters.Outcome) adapters.Outcome {
	if att, ok := adapters.AttemptFrom(ctx); !ok || att.Number <= 1 || a.oneObject(att, ok, a.cfg.Clock()) {
		return out
	}
	matches, _, err := a.scan(ctx, op)
	if err != nil || len(matches) < 2 {
		return out
	}
	keep := outcomeOf(matches[0])
	keep.ReportDuplicates(idsOf(matches[1:]))
	return keep
}

func formatMinorOf(o object) string {
	n, err := parseMinor(o.Amount.Value)
	if err != nil {
		return ""
	}
	return adapters.FormatMinor(n)
}

// listPage reads one page. Reads have no effect, so any failure to read is
// retryable; an unexpected answer is never a verdict.
func (a *Adapter) listPage(ctx context.Context, path string, q url.Values) ([]object, string, error) {
	req, err := adapters.NewRequest(ctx, http.MethodGet, a.cfg.BaseURL+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Send(req, 8<<20)
	if err != nil {
		return nil, "", adapters.NoEffect(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", adapters.NoEffect(a.statusError(resp))
	}
	items, next, err := parseList(resp.Body)
	if err != nil {
		return nil, "", adapters.Unexpected(adapters.Retry, "list %s: %v", path, err)
	}
	return items, next, nil
}
