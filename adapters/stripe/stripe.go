package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
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

// Metadata keys written on every PaymentIntent and refund.
const (
	MetaKey        = adapters.MetaKey
	MetaOrderID    = adapters.MetaOrderID
	MetaApprovalID = adapters.MetaApprovalID
)

// Safe codes of this adapter.
const (
	// CodeKeyInUse: 409, another request with this key is in flight.
	CodeKeyInUse = "idempotency_key_in_use"
	// CodeLookupIncomplete: Lookup read RefundMaxPages pages without a match.
	CodeLookupIncomplete = "lookup_incomplete"
)

// Adapter is the Stripe adapter. It is safe for concurrent use.
type Adapter struct {
	cfg    Config
	client *adapters.Client
}

var _ adapters.Adapter = (*Adapter)(nil)

// New builds the adapter: defaults, credential (value, file or
// environment), validation.
func New(cfg Config) (*Adapter, error) {
	cfg = cfg.WithDefaults()
	secret, err := cfg.Load(adapters.Credential(cfg.SecretKey))
	if err != nil {
		return nil, fmt.Errorf("%w: secret key: %w", ErrInvalidConfig, err)
	}
	// The rate limit's default parts depend on the key's mode; they are
	// filled before validation, so that rate_limit: {rate: 3} keeps the
	// default burst as every other adapter does.
	def := DefaultLiveRateLimit
	if k := secret.Reveal(); strings.HasPrefix(k, "sk_test_") || strings.HasPrefix(k, "rk_test_") {
		def = DefaultTestRateLimit
	}
	cfg.RateLimit = cfg.RateLimit.WithDefaults(def)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Adapter{cfg: cfg, client: cfg.NewClient(cfg.authorize(secret))}, nil
}

// Name returns the configured instance name.
func (a *Adapter) Name() string { return a.cfg.Name }

// TargetSystem is "payments".
func (a *Adapter) TargetSystem() string { return "payments" }

// Admit reserves a call's request in the client-side bucket (nil without a
// limit): the worker waits for it before it takes an attempt.
func (a *Adapter) Admit(operation.Operation) *adapters.Admission { return a.client.Admit(1) }

// Capabilities: Stripe deduplicates by Idempotency-Key (24h, parameters
// compared); Lookup searches metadata, whose index lags (SettleTime).
func (a *Adapter) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{NativeKey: true, Lookup: true, SettleTime: a.cfg.SettleTime, MaxKeyLen: MaxKeyLen}
}

// Execute creates and confirms a PaymentIntent off-session with the saved
// PaymentMethod account_id (charge), or creates a refund (refund), with the
// operation key as Idempotency-Key.
func (a *Adapter) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	var (
		form url.Values
		path string
		err  error
	)
	switch op.Type {
	case OpCharge:
		path = "/v1/payment_intents"
		form, err = chargeForm(op)
	case OpRefund:
		path = "/v1/refunds"
		form, err = refundForm(op)
	default:
		err = fmt.Errorf("operation type %q is not performed by the stripe adapter", op.Type)
	}
	if err != nil {
		return adapters.Outcome{}, adapters.Invalid(err)
	}
	req, err := adapters.NewRequest(ctx, http.MethodPost, a.cfg.BaseURL+path, []byte(form.Encode()))
	if err != nil {
		return adapters.Outcome{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// NewRequest leaves GetBody nil: net/http never re-sends this POST by
	// itself even though it carries Idempotency-Key.
	req.Header.Set("Idempotency-Key", adapters.TargetKey(op.Key.String(), MaxKeyLen))
	resp, err := a.client.Send(req, 0)
	if err != nil {
		a.cfg.Logger.Debug("stripe request failed", "operation_key", op.Key.String(), "error", err)
		return adapters.Outcome{}, err
	}
	return a.createOutcome(resp, op)
}

// authorize sets, on every request, the secret key and the account's
// headers.
func (c Config) authorize(secret redact.Secret) func(*http.Request) {
	bearer := adapters.BearerAuth(secret)
	return func(req *http.Request) {
		bearer(req)
		req.Header.Set("Accept", "application/json")
		if c.APIVersion != "" {
			req.Header.Set("Stripe-Version", c.APIVersion)
		}
		if c.Account != "" {
			req.Header.Set("Stripe-Account", c.Account)
		}
	}
}

func moneyOf(op operation.Operation) (int64, string, error) {
	minor := op.Int("amount_minor")
	if minor <= 0 {
		return 0, "", errors.New("amount_minor must be a positive integer")
	}
	cur := strings.ToLower(op.String("currency"))
	if len(cur) != 3 || strings.Trim(cur, "abcdefghijklmnopqrstuvwxyz") != "" {
		return 0, "", errors.New("currency must be a three-letter ISO 4217 code")
	}
	return minor, cur, nil
}

func setMetadata(form url.Values, op operation.Operation, orderID string) {
	form.Set("metadata["+MetaKey+"]", op.Key.String())
	if orderID != "" {
		form.Set("metadata["+MetaOrderID+"]", adapters.Truncate(orderID, 500))
	}
	if op.ApprovalID != "" {
		form.Set("metadata["+MetaApprovalID+"]", adapters.Truncate(op.ApprovalID, 500))
	}
}

func chargeForm(op operation.Operation) (url.Values, error) {
	minor, cur, err := moneyOf(op)
	if err != nil {
		return nil, err
	}
	pm, orderID := op.String("account_id"), op.String("order_id")
	if pm == "" {
		return nil, errors.New("account_id (the saved PaymentMethod) is required")
	}
	if orderID == "" {
		return nil, errors.New("order_id is required")
	}
	form := url.Values{}
	form.Set("amount", strconv.FormatInt(minor, 10))
	form.Set("currency", cur)
	form.Set("payment_method", pm)
	form.Set("confirm", "true")
	form.Set("off_session", "true")
	form.Set("description", adapters.Truncate("Order "+orderID, 1000))
	setMetadata(form, op, orderID)
	return form, nil
}

func refundForm(op operation.Operation) (url.Values, error) {
	minor, _, err := moneyOf(op)
	if err != nil {
		return nil, err
	}
	pi := op.String("payment_id")
	if pi == "" {
		return nil, errors.New("payment_id (the PaymentIntent) is required")
	}
	form := url.Values{}
	form.Set("payment_intent", pi)
	form.Set("amount", strconv.FormatInt(minor, 10))
	setMetadata(form, op, op.String("order_id"))
	return form, nil
}

// object is the part of a PaymentIntent or Refund the adapter reads.
type object struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Amount           *int64            `json:"amount"`
	Currency         string            `json:"currency"`
	Status           string            `json:"status"`
	Created          int64             `json:"created"`
	PaymentIntent    string            `json:"payment_intent"`
	Metadata         map[string]string `json:"metadata"`
	LastPaymentError *struct {
		Code        string `json:"code"`
		DeclineCode string `json:"decline_code"`
	} `json:"last_payment_error"`
}

var (
	intentStatus = map[string]bool{
		"succeeded": true, "processing": true, "requires_capture": true, "requires_payment_method": true,
		"requires_action": true, "requires_confirmation": true, "canceled": true,
	}
	refundStatus = map[string]bool{"succeeded": true, "pending": true, "requires_action": true, "failed": true, "canceled": true}
)

var errMalformed = errors.New("malformed Stripe object")

// parseObject decodes a PaymentIntent ("payment_intent") or a Refund
// ("refund") and checks the fields the adapter relies on.
func parseObject(raw []byte, kind string) (object, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return object{}, fmt.Errorf("%w: not a JSON object of the expected shape", errMalformed)
	}
	prefix, statuses := "pi_", intentStatus
	if kind == "refund" {
		prefix, statuses = "re_", refundStatus
	}
	switch {
	case o.Object != kind:
		return object{}, fmt.Errorf("%w: object is not a %s", errMalformed, kind)
	case !strings.HasPrefix(o.ID, prefix) || adapters.SafeToken(o.ID, 255) == "":
		return object{}, fmt.Errorf("%w: bad id", errMalformed)
	case !statuses[o.Status]:
		return object{}, fmt.Errorf("%w: unknown status", errMalformed)
	case o.Amount == nil || *o.Amount < 0:
		return object{}, fmt.Errorf("%w: bad amount", errMalformed)
	case len(o.Currency) != 3 || adapters.SafeToken(o.Currency, 3) == "":
		return object{}, fmt.Errorf("%w: bad currency", errMalformed)
	}
	return o, nil
}

// errorBody is {"error":{…}}.
type errorBody struct {
	Error *struct {
		Type          string          `json:"type"`
		Code          string          `json:"code"`
		DeclineCode   string          `json:"decline_code"`
		Param         string          `json:"param"`
		PaymentIntent json.RawMessage `json:"payment_intent"`
	} `json:"error"`
}

func (a *Adapter) createOutcome(resp *adapters.HTTPResponse, op operation.Operation) (adapters.Outcome, error) {
	kind := "payment_intent"
	if op.Type == OpRefund {
		kind = "refund"
	}
	reqID := adapters.SafeToken(resp.Header.Get("Request-Id"), 64)
	if resp.StatusCode == http.StatusOK {
		o, err := parseObject(resp.Body, kind)
		if err != nil {
			e := adapters.Unexpected(adapters.ReconcileBeforeRetry, "%s: HTTP 200: %v", op.Type, err)
			e.RequestID = reqID
			return adapters.Outcome{}, e
		}
		out := outcomeOf(o, reqID, resp.Header.Get("Idempotent-Replayed") == "true")
		if code, final := failedCode(o); final {
			e := adapters.NewError(code, adapters.NeverRetry, fmt.Errorf("%s %s is %s", kind, o.ID, o.Status))
			e.RequestID = reqID
			return out, e
		}
		if o.Status == "requires_confirmation" {
			return adapters.Outcome{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "%s %s was not confirmed", kind, o.ID)
		}
		return out, nil
	}
	e, out := a.statusError(resp)
	e.RequestID = reqID
	return out, e
}

// failedCode says whether an object is a final business failure, and its
// safe code.
func failedCode(o object) (string, bool) {
	switch {
	case o.Object == "refund" && (o.Status == "failed" || o.Status == "canceled"):
		return adapters.CodeDeclined, true
	case o.Object == "refund":
		return "", false
	case o.Status == "canceled", o.Status == "requires_action":
		return adapters.CodeDeclined, true
	case o.Status == "requires_payment_method" && o.LastPaymentError != nil:
		if o.LastPaymentError.DeclineCode == "insufficient_funds" || o.LastPaymentError.Code == "insufficient_funds" {
			return adapters.CodeInsufficientFunds, true
		}
		return adapters.CodeDeclined, true
	}
	return "", false
}

func outcomeOf(o object, reqID string, replayed bool) adapters.Outcome {
	d := map[string]any{"amount_minor": *o.Amount, "currency": strings.ToUpper(o.Currency)}
	if o.PaymentIntent != "" && adapters.SafeToken(o.PaymentIntent, 255) != "" {
		d["payment_id"] = o.PaymentIntent
	}
	if replayed {
		d[operation.DetailTargetReplayed] = true
	}
	if o.LastPaymentError != nil {
		if c := adapters.SafeToken(o.LastPaymentError.DeclineCode, 40); c != "" {
			d["decline_code"] = c
		}
	}
	return adapters.Outcome{ObjectID: o.ID, BusinessStatus: o.Status, RequestID: reqID, Details: d}
}

// statusError classifies a non-200 answer by status, Stripe's error type and
// code, and Stripe-Should-Retry. A card error may name the PaymentIntent.
func (a *Adapter) statusError(resp *adapters.HTTPResponse) (*adapters.Error, adapters.Outcome) {
	e := adapters.StatusError(resp, a.cfg.Clock())
	if e == nil {
		e = adapters.Unexpected(adapters.ReconcileBeforeRetry, "HTTP %d", resp.StatusCode)
	}
	var out adapters.Outcome
	var eb errorBody
	if json.Unmarshal(resp.Body, &eb) != nil || eb.Error == nil {
		return a.shouldRetry(resp, e), out
	}
	typ, code := adapters.SafeToken(eb.Error.Type, 40), adapters.SafeToken(eb.Error.Code, 60)
	e.Err = fmt.Errorf("HTTP %d %s %s", resp.StatusCode, typ, code)
	switch {
	case resp.StatusCode == http.StatusConflict:
		// In flight under the same key: not stored, safe to send again.
		e.Code, e.Class = CodeKeyInUse, adapters.Retry
		if e.RetryAfter == 0 {
			e.RetryAfter = time.Second
		}
	case typ == "idempotency_error":
		e.Code, e.Class = adapters.CodeKeyPayloadMismatch, adapters.NeverRetry
		e.Err = fmt.Errorf("HTTP %d idempotency_error: the key was used with other parameters", resp.StatusCode)
	case typ == "card_error":
		e.Class = adapters.NeverRetry
		e.Code = adapters.CodeDeclined
		if eb.Error.DeclineCode == "insufficient_funds" || eb.Error.Code == "insufficient_funds" {
			e.Code = adapters.CodeInsufficientFunds
		}
		e.Err = fmt.Errorf("HTTP %d card_error %s (%s)", resp.StatusCode, code, adapters.SafeToken(eb.Error.DeclineCode, 40))
		if len(eb.Error.PaymentIntent) > 0 {
			if o, err := parseObject(eb.Error.PaymentIntent, "payment_intent"); err == nil {
				out = outcomeOf(o, "", false)
			}
		}
	case resp.StatusCode == http.StatusTooManyRequests:
		e.Code, e.Class = adapters.CodeHTTP429, adapters.Retry
	}
	return a.shouldRetry(resp, e), out
}

// shouldRetry applies Stripe-Should-Retry to 5xx answers: "false" means the
// request may have been applied (reconcile), "true" that it may be sent
// again. It never softens a 500 (a cached indeterminate result).
func (a *Adapter) shouldRetry(resp *adapters.HTTPResponse, e *adapters.Error) *adapters.Error {
	if resp.StatusCode < 500 || resp.StatusCode == http.StatusInternalServerError {
		return e
	}
	switch resp.Header.Get("Stripe-Should-Retry") {
	case "false":
		e.Class = adapters.ReconcileBeforeRetry
	case "true":
		e.Class = adapters.Retry
	}
	return e
}

// Lookup finds an earlier attempt by metadata idemgate_key: charges through
// the Search API (eventually consistent: a "not found" counts only after
// SettleTime), refunds through the PaymentIntent's refund list (strongly
// consistent). The oldest match is the original.
func (a *Adapter) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	var (
		matches []object
		res     adapters.LookupResult
		err     error
	)
	switch op.Type {
	case OpCharge:
		matches, err = a.searchIntents(ctx, op.Key.String())
	case OpRefund:
		pi := op.String("payment_id")
		if pi == "" {
			return res, adapters.Invalid(errors.New("payment_id is required"))
		}
		var complete bool
		matches, complete, err = a.listRefunds(ctx, pi, op.Key.String())
		if err == nil && !complete && len(matches) == 0 {
			return adapters.LookupResult{Status: adapters.Indeterminate, Code: CodeLookupIncomplete}, nil
		}
	default:
		return res, adapters.Invalid(fmt.Errorf("operation type %q is not performed by the stripe adapter", op.Type))
	}
	if err != nil {
		return res, err
	}
	if len(matches) == 0 {
		return adapters.LookupResult{Status: adapters.NotFound}, nil
	}
	sort.SliceStable(matches, func(i, j int) bool { return matches[i].Created < matches[j].Created })
	o := matches[0]
	res = adapters.LookupResult{Status: adapters.Found, Outcome: outcomeOf(o, "", false)}
	if len(matches) > 1 {
		res.Code = adapters.CodeDuplicateObjects
		ids := make([]string, 0, len(matches)-1)
		for _, m := range matches[1:] {
			ids = append(ids, m.ID)
		}
		res.Outcome.ReportDuplicates(ids)
	}
	if minor, cur, err := moneyOf(op); err == nil && (minor != *o.Amount || cur != strings.ToLower(o.Currency)) {
		res.Final, res.Code = true, adapters.CodeKeyPayloadMismatch
		return res, nil
	}
	if code, final := failedCode(o); final {
		res.Final, res.Code = true, code
		return res, nil
	}
	if o.Status == "requires_confirmation" {
		return adapters.LookupResult{Status: adapters.Indeterminate, Code: adapters.CodeUnexpectedResponse}, nil
	}
	return res, nil
}

// searchQuery builds metadata['idemgate_key']:'<key>' with quotes and
// backslashes escaped.
func searchQuery(key string) string {
	esc := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(key)
	return "metadata['" + MetaKey + "']:'" + esc + "'"
}

func (a *Adapter) searchIntents(ctx context.Context, key string) ([]object, error) {
	q := url.Values{"query": {searchQuery(key)}, "limit": {"10"}}
	var list struct {
		Object string            `json:"object"`
		Data   []json.RawMessage `json:"data"`
	}
	if err := a.get(ctx, "/v1/payment_intents/search?"+q.Encode(), &list); err != nil {
		return nil, err
	}
	if list.Object != "search_result" {
		return nil, adapters.Unexpected(adapters.Retry, "search: not a search_result")
	}
	return a.matching(list.Data, "payment_intent", key)
}

func (a *Adapter) listRefunds(ctx context.Context, pi, key string) ([]object, bool, error) {
	var all []object
	after := ""
	for page := 0; page < a.cfg.RefundMaxPages; page++ {
		q := url.Values{"payment_intent": {pi}, "limit": {"100"}}
		if after != "" {
			q.Set("starting_after", after)
		}
		var list struct {
			Object  string            `json:"object"`
			HasMore bool              `json:"has_more"`
			Data    []json.RawMessage `json:"data"`
		}
		if err := a.get(ctx, "/v1/refunds?"+q.Encode(), &list); err != nil {
			return nil, false, err
		}
		if list.Object != "list" {
			return nil, false, adapters.Unexpected(adapters.Retry, "refunds: not a list")
		}
		found, err := a.matching(list.Data, "refund", key)
		if err != nil {
			return nil, false, err
		}
		all = append(all, found...)
		if !list.HasMore || len(list.Data) == 0 {
			return all, true, nil
		}
		var last object
		_ = json.Unmarshal(list.Data[len(list.Data)-1], &last)
		after = last.ID
	}
	return all, false, nil
}

// matching parses every item and keeps those carrying key.
func (a *Adapter) matching(items []json.RawMessage, kind, key string) ([]object, error) {
	var out []object
	for _, raw := range items {
		o, err := parseObject(raw, kind)
		if err != nil {
			return nil, adapters.Unexpected(adapters.Retry, "%s list: %v", kind, err)
		}
		if o.Metadata[MetaKey] == key {
			out = append(out, o)
		}
	}
	return out, nil
}

// get reads a JSON document. Reads have no effect: "may have had an
// effect" becomes retry.
func (a *Adapter) get(ctx context.Context, pathQuery string, v any) error {
	req, err := adapters.NewRequest(ctx, http.MethodGet, a.cfg.BaseURL+pathQuery, nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Send(req, 8<<20)
	if err != nil {
		return adapters.NoEffect(err)
	}
	if resp.StatusCode != http.StatusOK {
		e, _ := a.statusError(resp)
		return adapters.NoEffect(e)
	}
	return adapters.DecodeJSON(resp.Body, v, adapters.Retry, "list")
}
