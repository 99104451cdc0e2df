package tbank

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/tbank/tbanktoken"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// Operation types this adapter performs.
const (
	OpCharge = operation.TypePaymentCharge
	OpRefund = operation.TypePaymentRefund
)

// Safe codes of this adapter.
const (
	// CodeOrderInUse: Init refused the OrderId (ErrorCode "8") or Charge found
	// the payment no longer NEW: another attempt holds this key. Look it up.
	CodeOrderInUse = "order_id_in_use"
	// CodeInProgress: the order's payment is being processed (neither NEW
	// nor final): look it up again later.
	CodeInProgress = "payment_in_progress"
)

// DATA keys (≤ 20 characters each, values ≤ 100): the shared metadata names,
// but for the approval, kept as "idemgate_approval" as existing orders carry
// it.
const (
	dataKey      = adapters.MetaKey
	dataOrder    = adapters.MetaOrderID
	dataApproval = "idemgate_approval"
)

// Adapter is the T-Bank acquiring adapter. It is safe for concurrent use.
type Adapter struct {
	cfg      Config
	password redact.Secret // signs every request (Token); no header carries it
	client   *adapters.Client
}

var _ adapters.Adapter = (*Adapter)(nil)

// New builds the adapter: defaults, credentials (value, file or
// environment), validation.
func New(cfg Config) (*Adapter, error) {
	cfg, err := adapters.Configured(cfg)
	if err != nil {
		return nil, err
	}
	terminal, err := cfg.Load(adapters.Credential{Value: redact.Secret(cfg.TerminalKey), Env: cfg.TerminalKeyEnv})
	if err != nil {
		return nil, fmt.Errorf("%w: terminal key: %w", ErrInvalidConfig, err)
	}
	password, err := cfg.Load(adapters.Credential(cfg.Password))
	if err != nil {
		return nil, fmt.Errorf("%w: password: %w", ErrInvalidConfig, err)
	}
	cfg.TerminalKey = terminal.Reveal()
	return &Adapter{cfg: cfg, password: password, client: cfg.NewClient(nil)}, nil
}

// Name returns the configured instance name.
func (a *Adapter) Name() string { return a.cfg.Name }

// TargetSystem is "payments".
func (a *Adapter) TargetSystem() string { return "payments" }

// Admit reserves a call's first request in the client-side bucket (nil
// without a limit, the default): the worker waits for it before it takes an
// attempt.
func (a *Adapter) Admit(operation.Operation) *adapters.Admission { return a.client.Admit(1) }

// Capabilities: the key is the OrderId and CheckOrder finds the order's
// payments by it (strongly consistent). Whether Init refuses a repeated
// OrderId is configured (OrderIDUnique): NativeKey when it does, otherwise
// SingleFlight.
func (a *Adapter) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{
		NativeKey:    a.cfg.OrderIDUnique,
		SingleFlight: !a.cfg.OrderIDUnique,
		Lookup:       true,
		MaxKeyLen:    MaxKeyLen,
	}
}

// Execute performs a charge (CheckOrder, then Init and Charge with the
// saved card's RebillId unless the order already has a payment) or a refund
// (Cancel with ExternalRequestId).
func (a *Adapter) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	switch op.Type {
	case OpCharge:
		return a.charge(ctx, op)
	case OpRefund:
		return a.refund(ctx, op)
	}
	return adapters.Outcome{}, adapters.Invalid(fmt.Errorf("operation type %q is not performed by the tbank adapter", op.Type))
}

type chargeParams struct {
	orderID string
	amount  int64
	rebill  string
}

func chargeParamsOf(op operation.Operation) (chargeParams, error) {
	amount := op.Int("amount_minor")
	if amount <= 0 {
		return chargeParams{}, errors.New("amount_minor must be a positive integer")
	}
	if !strings.EqualFold(op.String("currency"), "RUB") {
		return chargeParams{}, errors.New("T-Bank acquiring charges RUB only")
	}
	rebill := op.String("account_id")
	if rebill == "" || len(rebill) > 64 {
		return chargeParams{}, errors.New("account_id (the saved card's RebillId) is required")
	}
	if op.String("order_id") == "" {
		return chargeParams{}, errors.New("order_id is required")
	}
	return chargeParams{orderID: adapters.TargetKey(op.Key.String(), MaxKeyLen), amount: amount, rebill: rebill}, nil
}

func (a *Adapter) charge(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	p, err := chargeParamsOf(op)
	if err != nil {
		return adapters.Outcome{}, adapters.Invalid(err)
	}
	// Look the key up first: an order that already has a payment is never
	// initialised again (the terminal may not refuse a repeated OrderId).
	found, err := a.checkOrder(ctx, p.orderID)
	if err != nil {
		return adapters.Outcome{}, adapters.NoEffect(err)
	}
	paymentID := ""
	if pay, ok := pick(found); ok {
		switch {
		case pay.amount != p.amount:
			return adapters.Outcome{}, adapters.NewError(adapters.CodeKeyPayloadMismatch, adapters.NeverRetry,
				fmt.Errorf("order already holds payment %s for another amount", pay.id))
		case succeeded[pay.status]:
			return outcomeOf(pay, p.orderID), nil
		case finalFailure[pay.status]:
			return outcomeOf(pay, p.orderID), declineError(pay.id, pay.code)
		case pay.status == StatusNew:
			paymentID = pay.id
		default:
			return adapters.Outcome{}, adapters.NewError(CodeInProgress, adapters.ReconcileBeforeRetry,
				fmt.Errorf("payment %s is %s", pay.id, pay.status))
		}
	}
	if paymentID == "" {
		paymentID, err = a.initPayment(ctx, op, p)
		if err != nil {
			return adapters.Outcome{}, err
		}
	}
	return a.chargePayment(ctx, op, p, paymentID)
}

// initPayment registers the order. Init moves no money and Execute always
// starts with CheckOrder, so a failure here, even after sending, is retry.
func (a *Adapter) initPayment(ctx context.Context, op operation.Operation, p chargeParams) (string, error) {
	data := map[string]string{dataOrder: adapters.Truncate(op.String("order_id"), 100)}
	if k := op.Key.String(); len(k) <= 100 {
		data[dataKey] = k
	}
	if op.ApprovalID != "" {
		data[dataApproval] = adapters.Truncate(op.ApprovalID, 100)
	}
	params := map[string]any{
		"Amount":      p.amount,
		"OrderId":     p.orderID,
		"Description": adapters.Truncate("Order "+op.String("order_id"), 140),
		"PayType":     "O",
		"DATA":        data,
	}
	ans, err := a.call(ctx, "Init", params)
	if err != nil {
		return "", adapters.NoEffect(err)
	}
	if !*ans.Success {
		if ans.ErrorCode == "8" {
			return "", adapters.NewError(CodeOrderInUse, adapters.ReconcileBeforeRetry, errors.New("the Init call refused the OrderId (ErrorCode 8): another attempt holds it"))
		}
		return "", codeError(string(ans.ErrorCode), "Init", adapters.NeverRetry)
	}
	if !safeID(string(ans.PaymentID)) || ans.OrderID != p.orderID {
		return "", adapters.Unexpected(adapters.Retry, "Init: answer without a valid PaymentId for our OrderId")
	}
	return string(ans.PaymentID), nil
}

func (a *Adapter) chargePayment(ctx context.Context, op operation.Operation, p chargeParams, paymentID string) (adapters.Outcome, error) {
	ans, err := a.call(ctx, "Charge", map[string]any{"PaymentId": paymentID, "RebillId": p.rebill})
	if err != nil {
		a.cfg.Logger.Debug("tbank charge failed", "operation_key", op.Key.String(), "error", err)
		return adapters.Outcome{}, err
	}
	if !*ans.Success {
		switch code := string(ans.ErrorCode); {
		case code == "8":
			return adapters.Outcome{}, adapters.NewError(CodeOrderInUse, adapters.ReconcileBeforeRetry,
				fmt.Errorf("the Charge call: payment %s is no longer NEW (ErrorCode 8)", paymentID))
		case ans.Status == StatusRejected || isDecline(code):
			pay := payment{id: paymentID, amount: p.amount, status: StatusRejected, code: code}
			return outcomeOf(pay, p.orderID), declineError(paymentID, code)
		default:
			// An unlisted refusal of the step that moves money: the card
			// network may have been reached; CheckOrder will tell.
			return adapters.Outcome{}, codeError(code, "Charge", adapters.ReconcileBeforeRetry)
		}
	}
	if string(ans.PaymentID) != paymentID || !safeStatus(ans.Status) {
		return adapters.Outcome{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "Charge: answer for another payment or without a status")
	}
	amount := p.amount
	if ans.Amount != nil {
		amount = *ans.Amount
	}
	pay := payment{id: paymentID, amount: amount, status: ans.Status}
	if !succeeded[pay.status] {
		if finalFailure[pay.status] {
			return outcomeOf(pay, p.orderID), declineError(paymentID, "")
		}
		return adapters.Outcome{}, adapters.NewError(CodeInProgress, adapters.ReconcileBeforeRetry, fmt.Errorf("the Charge call: payment %s is %s", paymentID, pay.status))
	}
	return outcomeOf(pay, p.orderID), nil
}

// payment is one payment of an order, reduced to safe fields.
type payment struct {
	id     string
	amount int64
	status string
	code   string
}

// pick chooses the payment that speaks for the order: one that moved money,
// else one in progress, else a NEW one, else a final failure.
func pick(ps []payment) (payment, bool) {
	rank := func(p payment) int {
		switch {
		case succeeded[p.status]:
			return 4
		case finalFailure[p.status]:
			return 1
		case p.status == StatusNew:
			return 2
		default:
			return 3
		}
	}
	best, ok := payment{}, false
	for _, p := range ps {
		if !ok || rank(p) > rank(best) {
			best, ok = p, true
		}
	}
	return best, ok
}

func outcomeOf(p payment, orderID string) adapters.Outcome {
	d := map[string]any{"amount_minor": p.amount, "currency": "RUB", "order_id": orderID}
	if p.code != "" && p.code != "0" {
		d["error_code"] = p.code
	}
	return adapters.Outcome{ObjectID: p.id, BusinessStatus: p.status, Details: d}
}

// checkOrder returns the payments of an order (CheckOrder).
func (a *Adapter) checkOrder(ctx context.Context, orderID string) ([]payment, error) {
	ans, err := a.call(ctx, "CheckOrder", map[string]any{"OrderId": orderID})
	if err != nil {
		return nil, err
	}
	if !*ans.Success {
		return nil, codeError(string(ans.ErrorCode), "CheckOrder", adapters.Retry)
	}
	if ans.OrderID != "" && ans.OrderID != orderID {
		return nil, adapters.Unexpected(adapters.Retry, "CheckOrder: answer for another order")
	}
	out := make([]payment, 0, len(ans.Payments))
	for _, p := range ans.Payments {
		if !safeID(string(p.PaymentID)) || !safeStatus(p.Status) || p.Amount == nil || !safeCode(orZero(string(p.ErrorCode))) {
			return nil, adapters.Unexpected(adapters.Retry, "CheckOrder: malformed payment entry")
		}
		out = append(out, payment{id: string(p.PaymentID), amount: *p.Amount, status: p.Status, code: string(p.ErrorCode)})
	}
	return out, nil
}

func orZero(c string) string {
	if c == "" {
		return "0"
	}
	return c
}

// Lookup finds the order's payments by OrderId (CheckOrder). A payment that
// moved money is Found; a rejected one is Found and Final; a NEW one (no
// money moved) is NotFound, so Execute may charge it; one in progress is
// Indeterminate. Refunds cannot be looked up by key (T-Bank has no search
// by ExternalRequestId): Indeterminate with lookup_unsupported; repeating
// Cancel with the same ExternalRequestId is the recovery ([3P]).
func (a *Adapter) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	switch op.Type {
	case OpCharge:
	case OpRefund:
		return adapters.LookupResult{Status: adapters.Indeterminate, Code: adapters.CodeLookupUnsupported}, nil
	default:
		return adapters.LookupResult{}, adapters.Invalid(fmt.Errorf("operation type %q is not performed by the tbank adapter", op.Type))
	}
	orderID := adapters.TargetKey(op.Key.String(), MaxKeyLen)
	ps, err := a.checkOrder(ctx, orderID)
	if err != nil {
		return adapters.LookupResult{}, adapters.NoEffect(err)
	}
	pay, ok := pick(ps)
	if !ok || pay.status == StatusNew {
		return adapters.LookupResult{Status: adapters.NotFound}, nil
	}
	res := adapters.LookupResult{Status: adapters.Found, Outcome: outcomeOf(pay, orderID)}
	if n := countMoved(ps); n > 1 {
		res.Code = adapters.CodeDuplicateObjects
		res.Outcome.Details["duplicates"] = n - 1
	}
	switch {
	case op.Fields != nil && op.Int("amount_minor") != pay.amount:
		// Only with the payload at hand: a key-only lookup (the reconciler
		// without the command) cannot tell a mismatch.
		res.Final, res.Code = true, adapters.CodeKeyPayloadMismatch
	case succeeded[pay.status]:
	case finalFailure[pay.status]:
		res.Final, res.Code = true, declineCode(pay.code)
	default:
		return adapters.LookupResult{Status: adapters.Indeterminate, Code: CodeInProgress}, nil
	}
	return res, nil
}

func countMoved(ps []payment) int {
	n := 0
	for _, p := range ps {
		if succeeded[p.status] {
			n++
		}
	}
	return n
}

func (a *Adapter) refund(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	pid := op.String("payment_id")
	if !safeID(pid) {
		return adapters.Outcome{}, adapters.Invalid(errors.New("payment_id must be a T-Bank PaymentId (digits)"))
	}
	amount := op.Int("amount_minor")
	if amount <= 0 {
		return adapters.Outcome{}, adapters.Invalid(errors.New("amount_minor must be a positive integer"))
	}
	if !strings.EqualFold(op.String("currency"), "RUB") {
		return adapters.Outcome{}, adapters.Invalid(errors.New("T-Bank acquiring refunds RUB only"))
	}
	ext := adapters.TargetKey(op.Key.String(), MaxKeyLen)
	ans, err := a.call(ctx, "Cancel", map[string]any{"PaymentId": pid, "Amount": amount, "ExternalRequestId": ext})
	if err != nil {
		return adapters.Outcome{}, err
	}
	if !*ans.Success {
		if ans.ErrorCode == "8" {
			return adapters.Outcome{}, codeError("8", "Cancel", adapters.NeverRetry)
		}
		return adapters.Outcome{}, codeError(string(ans.ErrorCode), "Cancel", adapters.ReconcileBeforeRetry)
	}
	if string(ans.PaymentID) != pid || !safeStatus(ans.Status) {
		return adapters.Outcome{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "Cancel: answer for another payment or without a status")
	}
	d := map[string]any{"payment_id": pid, "amount_minor": amount, "currency": "RUB", "external_request_id": ext}
	if ans.NewAmount != nil {
		d["remaining_minor"] = *ans.NewAmount
	}
	return adapters.Outcome{ObjectID: pid + "/" + ext, BusinessStatus: ans.Status, Details: d}, nil
}

// call signs and posts one method. HTTP other than 200 is classified by
// status; a 200 must carry a well-formed answer.
func (a *Adapter) call(ctx context.Context, method string, params map[string]any) (answer, error) {
	params["TerminalKey"] = a.cfg.TerminalKey
	params["Token"] = tbanktoken.Of(params, a.password.Reveal())
	resp, err := a.client.JSON(ctx, http.MethodPost, a.cfg.BaseURL+"/v2/"+method, params, nil)
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode != http.StatusOK {
		e := adapters.StatusError(resp, a.cfg.Clock())
		if e == nil {
			e = adapters.Unexpected(adapters.ReconcileBeforeRetry, "%s: HTTP %d", method, resp.StatusCode)
		}
		e.Err = fmt.Errorf("%s: %w", method, e.Err)
		return answer{}, e
	}
	ans, err := parseAnswer(resp.Body)
	if err != nil {
		return answer{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "%s: %v", method, err)
	}
	return ans, nil
}

// Error codes from T-Bank's published table ([3P] quote of
// developer.tbank.ru/eacq/intro/errors/error-codes).
var (
	authCodes         = map[string]bool{"202": true, "204": true, "331": true}
	insufficientCodes = map[string]bool{"103": true, "1051": true}
	declineCodes      = map[string]bool{"53": true, "99": true, "101": true, "104": true, "1001": true, "1057": true}
)

func isDecline(code string) bool {
	return insufficientCodes[code] || declineCodes[code] || (len(code) == 4 && code[0] == '1')
}

func declineCode(code string) string {
	if insufficientCodes[code] {
		return adapters.CodeInsufficientFunds
	}
	return adapters.CodeDeclined
}

func declineError(paymentID, code string) *adapters.Error {
	return adapters.NewError(declineCode(code), adapters.NeverRetry, fmt.Errorf("payment %s rejected (ErrorCode %s)", paymentID, code))
}

// codeError classifies a refusal (Success false). fallback is the class of
// a code this adapter does not know.
func codeError(code, method string, fallback adapters.Class) *adapters.Error {
	err := fmt.Errorf("%s refused with ErrorCode %s", method, code)
	switch {
	case authCodes[code]:
		return adapters.NewError(adapters.CodeAuthorizationDenied, adapters.NeverRetry, err)
	case code == "9999" || code == "7":
		return adapters.Invalid(err)
	case isDecline(code):
		return adapters.NewError(declineCode(code), adapters.NeverRetry, err)
	case code == "100":
		return adapters.NewError("tbank_"+code, adapters.ReconcileBeforeRetry, err)
	}
	return adapters.NewError("tbank_"+code, fallback, err)
}
